"""Save, load, and every way an index directory can be wrong."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest
from langchain_core.documents import Document

from ragtiller.core.tiers import SearchRequest
from ragtiller.errors import IndexStoreError
from ragtiller.index import ChunkingConfig, EmbeddedIndex, IndexManifest, LexicalConfig
from ragtiller.index.versions import current_version
from ragtiller.ingest import build_index, ingest
from ragtiller.models import HashingEmbedder

EMBEDDER = HashingEmbedder(dim=64)
QUERIES = ["cancel a task", "event loop callbacks", "queue full", "sqlite rows"]


def corpus() -> list[Document]:
    return [
        Document(
            page_content="# Tasks\n\nCancel a task with cancel().\n\n# Loops\n\nThe loop runs callbacks.",
            metadata={"source": "asyncio.md"},
        ),
        Document(
            page_content="A queue put waits when the queue is full.", metadata={"source": "q.txt"}
        ),
        Document(
            page_content="Cursors fetch sqlite rows.",
            metadata={"source": "db.txt", "namespace": "db"},
        ),
    ]


@pytest.fixture
def saved(tmp_path: Path) -> tuple[EmbeddedIndex, Path]:
    directory = tmp_path / "index"
    index = ingest(
        corpus(),
        directory,
        embedder=EMBEDDER,
        chunking=ChunkingConfig(chunk_tokens=50, overlap_tokens=5),
        lexical=LexicalConfig(k1=1.2),
        progress=False,
    )
    return index, directory


def results(index: EmbeddedIndex) -> list[list[tuple[str, float]]]:
    out = []
    for tier in index.tiers:
        for q in QUERIES:
            hits = tier.search(SearchRequest(query=q, vector=EMBEDDER.embed_query(q), k=5))
            out.append([(h["id"], round(h["score"], 5)) for h in hits])
    return out


def test_round_trip_gives_the_same_results_manifest_and_map(
    saved: tuple[EmbeddedIndex, Path],
) -> None:
    index, directory = saved
    loaded = EmbeddedIndex.load(directory, embedder=EMBEDDER)
    assert results(loaded) == results(index)
    assert any(results(index))
    assert loaded.manifest == index.manifest
    assert loaded.corpus_map == index.corpus_map
    assert loaded.embedder is EMBEDDER
    assert (loaded.stats.calls, loaded.stats.chunks_embedded) == (0, 0)  # nothing embedded on load


def test_vectors_are_memory_mapped_read_only(saved: tuple[EmbeddedIndex, Path]) -> None:
    _, directory = saved
    loaded = EmbeddedIndex.load(directory, embedder=EMBEDDER)
    assert isinstance(loaded.store.vectors, np.memmap)
    assert not loaded.store.vectors.flags.writeable


def test_manifest_records_embedder_configs_counts_and_time(
    saved: tuple[EmbeddedIndex, Path],
) -> None:
    index, directory = saved
    on_disk = IndexManifest.model_validate_json(
        (current_version(directory) / "manifest.json").read_text()
    )
    assert on_disk == index.manifest
    assert (on_disk.embedder.name, on_disk.embedder.dimension) == (EMBEDDER.model_name, 64)
    assert on_disk.chunking == ChunkingConfig(chunk_tokens=50, overlap_tokens=5)
    assert on_disk.lexical.k1 == 1.2
    assert (on_disk.counts.documents, on_disk.counts.sections, on_disk.counts.chunks) == (3, 4, 4)
    assert on_disk.namespaces == ("default", "db")
    assert on_disk.format_version == 2
    assert on_disk.created_at.tzinfo is not None
    assert abs((datetime.now(UTC) - on_disk.created_at).total_seconds()) < 600
    raw = json.loads((current_version(directory) / "manifest.json").read_text())
    assert raw["created_at"].endswith("Z")


@pytest.mark.parametrize(
    ("embedder", "message"),
    [
        (
            HashingEmbedder(dim=32),
            r"built with embedder 'ragtiller/hashing-v1-ngram0\.25' \(dimension 64\) but is being loaded with 'ragtiller/hashing-v1-ngram0\.25' \(dimension 32\)",
        ),
        (
            HashingEmbedder(dim=64, ngram_weight=0.0),
            r"loaded with 'ragtiller/hashing-v1-ngram0' \(dimension 64\)",
        ),
    ],
)
def test_loading_with_another_embedder_names_both(
    saved: tuple[EmbeddedIndex, Path], embedder: HashingEmbedder, message: str
) -> None:
    with pytest.raises(IndexStoreError, match=message):
        EmbeddedIndex.load(saved[1], embedder=embedder)


def test_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(IndexStoreError, match="directory not found"):
        EmbeddedIndex.load(tmp_path / "nope", embedder=EMBEDDER)


@pytest.mark.parametrize(
    "name",
    [
        "manifest.json",
        "chunks.jsonl",
        "vectors.npy",
        "parents.jsonl",
        "corpus_map.txt",
        "lexical/vocab.index.json",
        "lexical/data.csc.index.npy",
        "parent_rows.npy",
        "corpus_outline.npz",
    ],
)
def test_partial_directory_names_the_missing_file(
    saved: tuple[EmbeddedIndex, Path], name: str
) -> None:
    _, directory = saved
    version = current_version(directory)
    (version / name).unlink()
    with pytest.raises(IndexStoreError, match=rf"{Path(name).name} is missing"):
        EmbeddedIndex.load(directory, embedder=EMBEDDER)


@pytest.mark.parametrize(
    ("name", "damage", "message"),
    [
        ("manifest.json", "{not json", r"manifest\.json is corrupt"),
        (
            "manifest.json",
            '{"format_version": 2}',
            r"manifest\.json is corrupt: embedder: Field required; chunking: Field required",
        ),
        (
            "manifest.json",
            '{"format_version": 1}',
            r"manifest\.json has format_version 1; this ragtiller reads 2: rebuild the index",
        ),
        ("chunks.jsonl", "garbage\n", r"chunks\.jsonl is corrupt: line 1 is not JSON"),
        ("chunks.jsonl", '{"id": "x"}\n', r"chunks\.jsonl is corrupt: line 1 lacks"),
        (
            "parents.jsonl",
            "",
            r"parents\.jsonl is corrupt: it holds 0 sections, the manifest says 4",
        ),
        ("vectors.npy", "not an npy file", r"vectors\.npy is corrupt"),
        ("lexical/params.index.json", "{", r"lexical.* is corrupt"),
    ],
)
def test_corrupt_files_are_named(
    saved: tuple[EmbeddedIndex, Path], name: str, damage: str, message: str
) -> None:
    _, directory = saved
    (current_version(directory) / name).write_text(damage)
    with pytest.raises(IndexStoreError, match=message):
        EmbeddedIndex.load(directory, embedder=EMBEDDER)


def test_vectors_with_the_wrong_row_count_are_named(saved: tuple[EmbeddedIndex, Path]) -> None:
    _, directory = saved
    np.save(current_version(directory) / "vectors.npy", np.zeros((2, 64), dtype=np.float32))
    with pytest.raises(
        IndexStoreError,
        match=r"vectors\.npy is corrupt: .*shape \(2, 64\), expected float32 with 4 rows",
    ):
        EmbeddedIndex.load(directory, embedder=EMBEDDER)


def test_a_truncated_chunk_table_disagrees_with_the_manifest(
    saved: tuple[EmbeddedIndex, Path],
) -> None:
    _, directory = saved
    chunks = current_version(directory) / "chunks.jsonl"
    lines = chunks.read_text().splitlines(keepends=True)
    chunks.write_text("".join(lines[:-1]))
    with pytest.raises(IndexStoreError, match=r"(chunks\.jsonl|vectors\.npy) is corrupt"):
        EmbeddedIndex.load(directory, embedder=EMBEDDER)


def test_save_replaces_an_index_and_leaves_no_staging_behind(
    saved: tuple[EmbeddedIndex, Path],
) -> None:
    index, directory = saved
    other = build_index(
        [Document(page_content="only one", metadata={"source": "one"})],
        embedder=EMBEDDER,
        progress=False,
    )
    other.save(directory)
    assert EmbeddedIndex.load(directory, embedder=EMBEDDER).manifest.counts.chunks == 1
    assert sorted(p.name for p in directory.parent.iterdir()) == ["index"]
    index.save(directory)  # and back
    assert EmbeddedIndex.load(directory, embedder=EMBEDDER).manifest == index.manifest


def test_save_refuses_a_non_empty_directory_that_is_not_an_index(
    saved: tuple[EmbeddedIndex, Path], tmp_path: Path
) -> None:
    index, _ = saved
    precious = tmp_path / "home"
    precious.mkdir()
    (precious / "thesis.tex").write_text("years of work")
    with pytest.raises(
        IndexStoreError, match=r"refusing to save into .*home: it is not empty and holds no index"
    ):
        index.save(precious)
    assert (precious / "thesis.tex").read_text() == "years of work"
