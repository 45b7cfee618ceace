"""float16 vector storage (``ingest --vector-dtype float16``): recorded in the manifest,
memory-mapped at open, scored in float32, filters exact, kept by incremental re-ingest."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest
from langchain_core.documents import Document

from ragtiller.cli.app import EXIT_USAGE, main
from ragtiller.errors import IndexStoreError, IngestError
from ragtiller.index import NumpyVectorStore, open_index
from ragtiller.index import ann as ann_module
from ragtiller.index.ann import ANN_FILE, AnnIndex
from ragtiller.index.embedded import EmbeddedIndex
from ragtiller.index.versions import current_version
from ragtiller.ingest import ChangeCounts, build_index, ingest
from ragtiller.models import HashingEmbedder

EMBEDDER = HashingEmbedder(dim=64)
WORDS = ["wing", "flutter", "boundary", "layer", "shock", "wave", "heat", "transfer", "panel"]
WORDS += ["buckling", "nozzle", "jet", "stall", "drag", "lift", "vortex"]
ROUNDING = 2.0**-11
"""float16 keeps 11 significant bits: a unit row's cosine with a unit query moves by at most
this much (|sum q_i * d_i| <= 2^-11 * sum |q_i v_i| <= 2^-11)."""


def corpus(n: int = 240) -> list[Document]:
    rng = np.random.default_rng(0)
    docs = []
    for i in range(n):
        words = " ".join(rng.choice(WORDS, 12))
        docs.append(
            Document(
                page_content=f"# Part {i}\n\n{words} {i}.",
                metadata={
                    "source": f"d{i}.md",
                    "tenant": "acme" if i % 2 else "globex",
                    "namespace": "ops" if i % 3 == 0 else "default",
                },
            )
        )
    return docs


@pytest.fixture(scope="module")
def pair() -> tuple[EmbeddedIndex, EmbeddedIndex]:
    """The same corpus as a float32 and as a float16 index."""
    docs = corpus()
    f32 = build_index(docs, embedder=EMBEDDER, progress=False)
    f16 = build_index(docs, embedder=EMBEDDER, progress=False, vector_dtype="float16")
    return f32, f16


def queries() -> list[list[float]]:
    rng = np.random.default_rng(1)
    return [EMBEDDER.embed_query(" ".join(rng.choice(WORDS, 3))) for _ in range(40)]


def test_the_manifest_records_the_dtype_and_open_memory_maps_it(tmp_path: Path) -> None:
    index = ingest(
        corpus(30), tmp_path / "idx", embedder=EMBEDDER, progress=False, vector_dtype="float16"
    )
    version = current_version(tmp_path / "idx")
    assert json.loads((version / "manifest.json").read_text())["vector_dtype"] == "float16"
    stored = np.load(version / "vectors.npy")
    assert stored.dtype == np.float16
    opened = open_index(tmp_path / "idx")
    assert opened.manifest.vector_dtype == "float16"
    assert isinstance(opened.store.vectors, np.memmap)
    assert opened.store.vectors.dtype == np.float16
    assert np.array_equal(opened.store.vectors, index.store.vectors)
    # the float16 rows are the float32 rows rounded
    f32 = build_index(corpus(30), embedder=EMBEDDER, progress=False)
    assert np.array_equal(stored, f32.store.vectors.astype(np.float16))


def test_vectors_of_another_dtype_than_the_manifest_fail_the_open(tmp_path: Path) -> None:
    ingest(corpus(10), tmp_path / "idx", embedder=EMBEDDER, progress=False)
    path = current_version(tmp_path / "idx") / "vectors.npy"
    np.save(path, np.load(path).astype(np.float16))
    with pytest.raises(
        IndexStoreError, match=r"holds a float16 array of shape \(\d+, 64\), expected float32"
    ):
        open_index(tmp_path / "idx")


@pytest.mark.parametrize(
    "scope",
    [{}, {"filter": {"tenant": "acme"}}, {"namespaces": ["ops"]}, {"namespaces": ["default"]}],
)
def test_exact_search_matches_float32_except_near_ties(
    pair: tuple[EmbeddedIndex, EmbeddedIndex], scope: dict[str, object]
) -> None:
    """What holds exactly: every float16 score is the float32 dot product of the float16 row,
    within 2^-11 of the float32 index's score; no pair whose float32 scores differ by more than
    twice that is ranked the other way; every row clearly inside float32's top k (by more than
    twice that) is in float16's top k; the scope is exact."""
    f32, f16 = pair
    k, same, positions = 10, 0, 0
    widened = np.asarray(f16.store.vectors, dtype=np.float64)
    for query in queries():
        everything = f32.store.search_rows(query, 10_000, **scope)  # type: ignore[arg-type]
        f32_score = dict(everything)
        got = f16.store.search_rows(query, k, **scope)  # type: ignore[arg-type]
        assert len(got) == k
        assert {row for row, _ in got} <= f32_score.keys()  # the scope holds exactly
        q = np.asarray(query, dtype=np.float64)
        q /= np.linalg.norm(q)
        for row, score in got:
            assert score == pytest.approx(float(widened[row] @ q), abs=1e-6)
            assert score == pytest.approx(f32_score[row], abs=ROUNDING)
        for (a, _), (b, _) in itertools.combinations(got, 2):
            assert f32_score[a] >= f32_score[b] - 2 * ROUNDING
        cut = everything[k][1]
        clearly_in = {row for row, score in everything[:k] if score > cut + 2 * ROUNDING}
        assert clearly_in <= {row for row, _ in got}
        same += sum(a == b for (a, _), (b, _) in zip(got, everything, strict=False))
        positions += k
    assert same / positions >= 0.9  # and in practice the lists are the same


def test_the_dense_and_parent_child_tiers_keep_their_ranking_semantics(
    pair: tuple[EmbeddedIndex, EmbeddedIndex],
) -> None:
    from ragtiller.core.tiers import SearchRequest

    f32, f16 = pair
    agree = total = 0
    for query in queries():
        request = SearchRequest(query="", vector=query, k=5, filter={"tenant": "globex"})
        for a, b in zip(f32.tiers[:2], f16.tiers[:2], strict=True):
            want, got = a.search(request), b.search(request)
            assert {h["metadata"]["tenant"] for h in got} == {"globex"}
            agree += len({h["id"] for h in want} & {h["id"] for h in got})
            total += len(want)
    assert agree / total >= 0.97


def test_a_float16_graph_holds_the_same_rows_and_keeps_filters_exact(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(ann_module, "ANN_MIN_ROWS", 10)  # a small index gets a graph
    ingest(corpus(), tmp_path / "idx", embedder=EMBEDDER, progress=False, vector_dtype="float16")
    version = current_version(tmp_path / "idx")
    opened = open_index(tmp_path / "idx")
    graph = opened.store.ann
    assert graph is not None and graph.dtype == "float16"
    # the store searches the graph's float16 rows, bit for bit those of vectors.npy
    assert not isinstance(opened.store.vectors, np.memmap)
    assert opened.store.vectors.dtype == np.float16
    assert np.array_equal(opened.store.vectors, np.load(version / "vectors.npy"))
    monkeypatch.setattr(ann_module, "EXACT_SCOPE_ROWS", 0)  # filtered searches use the graph
    monkeypatch.setattr(ann_module, "EXACT_SCOPE_SHARE", 0.0)
    found = 0
    for query in queries():
        for tenant in ("acme", "globex"):
            approx = opened.store.search_rows(
                query, 10, approximate=True, filter={"tenant": tenant}
            )
            exact = opened.store.search_rows(query, 10, filter={"tenant": tenant})
            metadatas = opened.store.records.metadatas
            assert len(approx) == 10 and {metadatas[r]["tenant"] for r, _ in approx} == {tenant}
            found += len({r for r, _ in approx} & {r for r, _ in exact})
    assert found / (10 * 2 * len(queries())) >= 0.95
    with pytest.raises(IndexStoreError, match="stores float16 vectors, the manifest says float32"):
        AnnIndex.load(version / ANN_FILE, rows=len(opened.store), dimension=64)


def test_a_float16_graph_built_from_a_store_round_trips(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    vectors = rng.standard_normal((500, 32)).astype(np.float32)
    store = NumpyVectorStore.from_vectors(
        [f"r{i}" for i in range(500)], vectors, HashingEmbedder(32), dtype="float16"
    )
    graph = AnnIndex.build(store.vectors)
    assert graph.dtype == "float16" and np.array_equal(graph.vectors(), store.vectors)
    graph.save(tmp_path / ANN_FILE)
    loaded = AnnIndex.load(tmp_path / ANN_FILE, rows=500, dimension=32, dtype="float16")
    assert np.array_equal(loaded.vectors(), store.vectors)
    store.add_texts(["one more"])  # a write keeps the store's dtype
    assert store.vectors.dtype == np.float16 and len(store.vectors) == 501


FILES = {
    "guide.md": "# Install\n\nRun pip install ragtiller to get the package and its CLI.\n\n"
    "# Quota\n\nThe ledger counts every chat call against the daily budget in UTC.\n",
    "notes.txt": "Plain notes: the gate refuses a turn when the budget is spent.\n",
}


@pytest.fixture
def files(tmp_path: Path) -> Path:
    root = tmp_path / "docs"
    root.mkdir()
    for name, text in FILES.items():
        (root / name).write_text(text)
    return root


def test_incremental_re_ingest_keeps_the_dtype_and_the_kept_rows(
    files: Path, tmp_path: Path
) -> None:
    before = ingest(
        [files], tmp_path / "idx", embedder=EMBEDDER, progress=False, vector_dtype="float16"
    )
    (files / "notes.txt").write_text("Plain notes: the gate refuses a turn once quota is gone.\n")
    after = ingest(
        [files], tmp_path / "idx", embedder=EMBEDDER, progress=False, vector_dtype="float16"
    )
    assert after.report is not None and after.report.embedded == 1
    assert after.manifest.vector_dtype == "float16"
    opened = open_index(tmp_path / "idx")
    assert opened.store.vectors.dtype == np.float16
    old = dict(zip(before.store.records.ids, before.store.vectors, strict=True))
    for id_, row in zip(opened.store.records.ids, opened.store.vectors, strict=True):
        if id_ in old:  # re-normalised in float32 and rounded again: within one float16 step
            assert np.abs(row.astype(np.float32) - old[id_].astype(np.float32)).max() <= 2**-10


def test_a_dtype_change_re_saves_or_re_embeds_and_says_why(files: Path, tmp_path: Path) -> None:
    directory = tmp_path / "idx"
    ingest([files], directory, embedder=EMBEDDER, progress=False)
    to_f16 = ingest([files], directory, embedder=EMBEDDER, progress=False, vector_dtype="float16")
    assert to_f16.report is not None
    assert to_f16.report.embedded == 0  # float32 vectors round to float16 without embedding
    assert to_f16.report.version == "v000002"
    assert open_index(directory).store.vectors.dtype == np.float16
    with pytest.raises(IngestError, match="vector dtype changed from float16 to float32"):
        ingest([files], directory, embedder=EMBEDDER, progress=False, cleanup="incremental")
    back = ingest([files], directory, embedder=EMBEDDER, progress=False)
    assert back.report is not None and back.report.rebuild_reason is not None
    assert "float16 to float32" in back.report.rebuild_reason
    assert back.report.chunks == ChangeCounts(added=back.manifest.counts.chunks)
    fresh = build_index([files], embedder=EMBEDDER, progress=False)
    assert np.array_equal(open_index(directory).store.vectors, fresh.store.vectors)
    with pytest.raises(IngestError, match="vector_dtype must be one of"):
        build_index([files], embedder=EMBEDDER, progress=False, vector_dtype="int8")  # type: ignore[arg-type]


def test_the_cli_flag_writes_a_float16_index(files: Path, tmp_path: Path) -> None:
    code = main(
        [
            "ingest",
            str(files),
            "--index",
            str(tmp_path / "idx"),
            "--embedder",
            "hashing",
            "--vector-dtype",
            "float16",
            "--quiet",
        ]
    )
    assert code == 0
    assert open_index(tmp_path / "idx").manifest.vector_dtype == "float16"


def test_the_cli_refuses_the_flag_for_another_store(
    files: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        ["ingest", str(files), "--store", "x:y", "--records", str(tmp_path / "r.db"),
         "--vector-dtype", "float16", "--quiet"]
    )  # fmt: skip
    assert code == EXIT_USAGE
    assert "--vector-dtype sets the embedded index's storage" in capsys.readouterr().err
