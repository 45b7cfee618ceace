"""Checked on load: vectors with NaN or inf, or of the wrong shape, fail the open clearly."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from langchain_core.documents import Document

from ragtiller.cli.app import main
from ragtiller.errors import IndexStoreError
from ragtiller.index import EmbeddedIndex, open_index
from ragtiller.index.versions import current_version
from ragtiller.ingest import build_index
from ragtiller.models import HashingEmbedder

EMBEDDER = HashingEmbedder()


@pytest.fixture
def directory(tmp_path: Path) -> Path:
    docs = [
        Document(
            page_content=f"# T{i}\n\nText number {i} about quotas.", metadata={"source": f"{i}.md"}
        )
        for i in range(3)
    ]
    build_index(docs, embedder=EMBEDDER, progress=False).save(tmp_path / "idx")
    return tmp_path / "idx"


def damage(directory: Path, change: str) -> None:
    path = current_version(directory) / "vectors.npy"
    vectors = np.load(path)
    if change == "nan":
        vectors[1, 5] = np.nan
    elif change == "inf":
        vectors[2, 0] = -np.inf
    elif change == "dimension":
        vectors = np.zeros((3, 128), dtype=np.float32)
    elif change == "float64":
        vectors = vectors.astype(np.float64)
    elif change == "one-dimensional":
        vectors = vectors[:, 0].copy()
    np.save(path, vectors)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            "nan",
            r"vectors\.npy is corrupt: 1 vector\(s\) hold NaN or infinite values \(first: row 1\); rebuild the index",
        ),
        (
            "inf",
            r"vectors\.npy is corrupt: 1 vector\(s\) hold NaN or infinite values \(first: row 2\)",
        ),
        ("dimension", r"vectors\.npy is corrupt: 128-dimensional vectors, the manifest says 256"),
        (
            "float64",
            r"vectors\.npy is corrupt: holds a float64 array of shape \(3, 256\), expected float32 with 3 rows",
        ),
        ("one-dimensional", r"vectors\.npy is corrupt: holds a float32 array of shape \(3,\)"),
    ],
)
def test_bad_vectors_fail_the_open_with_a_clear_message(
    directory: Path, change: str, message: str
) -> None:
    damage(directory, change)
    with pytest.raises(IndexStoreError, match=message):
        EmbeddedIndex.load(directory, embedder=EMBEDDER)
    with pytest.raises(IndexStoreError, match=message):
        open_index(directory)


def test_ask_on_a_nan_index_is_one_error_line_not_a_silent_empty_answer(
    directory: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    damage(directory, "nan")
    assert main(["ask", "quotas", "--index", str(directory)]) == 3  # EXIT_INDEX
    err = capsys.readouterr().err
    assert err.startswith("ragtiller: error: index file ") and "NaN or infinite" in err
