"""The ONNX local embedder: same vectors as sentence-transformers, no torch at run time.

The export runs once per machine (into the user cache, like a user's first run), so the
first test to need it pays for it.
"""

from __future__ import annotations

import builtins
import json
import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from langchain_core.documents import Document

from ragtiller.cli.app import main
from ragtiller.errors import ModelPrepareError
from ragtiller.index.variant_check import (
    MIN_AGREEMENT,
    variant_rebuild_reason,
    vector_agreement,
)
from ragtiller.ingest import build_index
from ragtiller.models import MiniLMEmbedder, local_embedder
from ragtiller.models.onnx_embedder import OnnxMiniLMEmbedder
from ragtiller.models.onnx_model import DEFAULT_VARIANT, PreparedModel, prepare_model

pytestmark = pytest.mark.slow

TEXTS = [
    "How do I cancel an asyncio task?",
    "  Leading and trailing spaces, and UPPER case.  ",
    "résumé, naïve café — Ünïcode and 中文 characters",
    "the boundary layer on a flat plate in hypersonic flow " * 40,  # past 256 wordpieces
    "x",
    "SQLite cursors fetch rows from a database table.",
]
DOCS = [
    Document(page_content=text, metadata={"source": f"doc{i}", "title": f"Title {i}"})
    for i, text in enumerate(TEXTS)
]


DEFAULT = f"onnx-{DEFAULT_VARIANT}"


@pytest.fixture(scope="module")
def prepared() -> PreparedModel:
    return prepare_model()


@pytest.fixture(scope="module")
def reference() -> np.ndarray[Any, Any]:
    """sentence-transformers' vectors for TEXTS (the torch path)."""
    return np.asarray(MiniLMEmbedder().embed_documents(TEXTS))


def test_int8_vectors_match_sentence_transformers(reference: np.ndarray[Any, Any]) -> None:
    int8 = OnnxMiniLMEmbedder(prepare_model("int8"), batch_size=4)
    vectors = np.asarray(int8.embed_documents(TEXTS))
    assert vectors.shape == (len(TEXTS), 384)
    assert np.linalg.norm(vectors, axis=1) == pytest.approx(1.0, abs=1e-5)
    cosines = (vectors * reference).sum(axis=1)
    assert cosines.mean() >= 0.99 and cosines.min() >= 0.97, cosines


def test_fp32_export_pools_and_normalises_exactly_like_sentence_transformers(
    reference: np.ndarray[Any, Any],
) -> None:
    vectors = np.asarray(OnnxMiniLMEmbedder(prepare_model("fp32")).embed_documents(TEXTS))
    assert (vectors * reference).sum(axis=1).min() >= 0.9999


def test_batching_and_length_order_do_not_change_fp32_vectors() -> None:
    fp32 = prepare_model("fp32")
    one_batch = OnnxMiniLMEmbedder(fp32, batch_size=64).embed_documents(TEXTS)
    singles = [OnnxMiniLMEmbedder(fp32).embed_query(t) for t in TEXTS]
    assert np.allclose(one_batch, singles, atol=1e-5)  # input order kept, padding masked out


def test_int8_vectors_depend_on_the_batch_only_slightly() -> None:
    # Dynamic quantization scales activations per batch, so neighbours shift a vector a bit.
    int8 = prepare_model("int8")
    one_batch = np.asarray(OnnxMiniLMEmbedder(int8, batch_size=64).embed_documents(TEXTS))
    singles = np.asarray([OnnxMiniLMEmbedder(int8).embed_query(t) for t in TEXTS])
    cosines = (one_batch * singles).sum(axis=1)
    assert cosines.min() >= 0.97 and cosines.mean() >= 0.98, cosines


def test_batches_run_at_once_give_the_vectors_they_give_one_after_another() -> None:
    # Ingest runs a call's batches on every core; each batch must come out as it does alone.
    int8 = prepare_model("int8")
    texts = [f"{t} {i}" for i in range(6) for t in TEXTS]
    serial = OnnxMiniLMEmbedder(int8, batch_size=3, workers=1).embed_matrix(texts)
    together = OnnxMiniLMEmbedder(int8, batch_size=3, workers=4).embed_matrix(texts)
    assert len(texts) > 3 * 4  # more batches than workers, so workers take several each
    assert np.array_equal(serial, together)


def test_workers_must_be_positive() -> None:
    with pytest.raises(ValueError, match="workers must be > 0"):
        OnnxMiniLMEmbedder(prepare_model("int8"), workers=0)


def test_runtime_path_imports_neither_torch_nor_transformers(
    prepared: PreparedModel, tmp_path: Path
) -> None:
    script = f"""
import json, sys
from langchain_core.documents import Document
from ragtiller.cli.app import main
from ragtiller.ingest import build_index
from ragtiller.models import local_embedder
emb = local_embedder()
docs = [Document(page_content=t, metadata={{"source": str(i)}}) for i, t in enumerate({TEXTS!r})]
build_index(docs, embedder=emb, progress=False).save({str(tmp_path / "idx")!r})
code = main(["ask", "how do I cancel a task?", "--index", {str(tmp_path / "idx")!r}, "--json"])
heavy = [m for m in ("torch", "transformers", "sentence_transformers") if m in sys.modules]
print(json.dumps({{"code": code, "variant": emb.variant, "heavy": heavy}}), file=sys.stderr)
"""
    run = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=600
    )
    result = json.loads(run.stderr.strip().splitlines()[-1])
    assert result == {"code": 0, "variant": DEFAULT, "heavy": []}


def test_manifest_records_the_variant_and_the_cli_finds_the_cached_model(
    prepared: PreparedModel, capsys: pytest.CaptureFixture[str]
) -> None:
    index = build_index(DOCS, embedder=local_embedder(), progress=False)
    assert index.manifest.embedder_variant == DEFAULT
    assert main(["model", "prepare"]) == 0
    assert f"{prepared.onnx_path} (already cached)" in capsys.readouterr().out


def test_missing_exporter_falls_back_to_torch_with_one_notice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("RAGTILLER_MODEL_CACHE", str(tmp_path / "empty-cache"))
    real_import = builtins.__import__

    def no_onnx(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "onnx" or name.startswith("onnx."):
            raise ImportError("No module named 'onnx'")
        return real_import(name, *args, **kwargs)

    monkeypatch.delitem(sys.modules, "onnx", raising=False)
    monkeypatch.setattr(builtins, "__import__", no_onnx)
    with pytest.raises(ModelPrepareError, match=r"ragtiller\[export\]"):
        local_embedder(runtime="onnx")
    with caplog.at_level(logging.WARNING, logger="ragtiller.index"):
        embedder = local_embedder()
    assert isinstance(embedder, MiniLMEmbedder)
    notices = [r.getMessage() for r in caplog.records]
    assert len(notices) == 1 and "\n" not in notices[0]
    assert "runs on torch" in notices[0] and "onnx" in notices[0]
    index = build_index(DOCS[:2], embedder=embedder, progress=False)
    assert index.manifest.embedder_variant == "torch-fp32 (fallback: ONNX unavailable)"


def test_an_index_from_another_variant_is_kept_only_while_vectors_agree(
    prepared: PreparedModel,
) -> None:
    torch_index = build_index(DOCS, embedder=MiniLMEmbedder(), progress=False)
    onnx = local_embedder()
    assert vector_agreement(torch_index, onnx) >= MIN_AGREEMENT
    assert variant_rebuild_reason(torch_index, onnx) is None
    # Vectors from another model (here: permuted rows) must not survive a variant change.
    torch_index.store.vectors[:] = torch_index.store.vectors[::-1].copy()
    reason = variant_rebuild_reason(torch_index, onnx)
    assert reason is not None
    assert f"from torch-fp32 to {DEFAULT}" in reason and "< 0.99" in reason


def test_ingest_over_a_disagreeing_variant_says_why_it_rebuilt(
    prepared: PreparedModel, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "notes.md"
    source.write_text("\n\n".join(f"# Part {i}\n\n{text}" for i, text in enumerate(TEXTS)))
    old = build_index([source], embedder=MiniLMEmbedder(), progress=False)
    old.store.vectors[:] = old.store.vectors[::-1].copy()  # as if another model had made them
    old.save(tmp_path / "idx")
    assert main(["ingest", str(source), "--index", str(tmp_path / "idx"), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert f"full rebuild: embedder variant changed from torch-fp32 to {DEFAULT}" in out
    assert main(["ingest", str(source), "--index", str(tmp_path / "idx"), "--quiet"]) == 0
    assert "full rebuild" not in capsys.readouterr().out  # same variant: no check
