"""Folder -> your own store -> graph: ``ingest_to_store`` into an embedded, persistent Chroma."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_chroma import Chroma
from langchain_community.retrievers import BM25Retriever
from langchain_core.vectorstores import InMemoryVectorStore

from ragtiller import build_graph
from ragtiller.adapters import RetrieverTier, VectorStoreTier
from ragtiller.errors import IngestError
from ragtiller.ingest import SQLiteRecordManager, build_index, chunk_sources, ingest_to_store
from ragtiller.models import HashingEmbedder

EMB = HashingEmbedder(dim=64)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "tasks.md").write_text(
        "# Tasks\n\nCancel a running task with task.cancel().\n\n"
        "## Timeouts\n\nwait_for applies a timeout to an awaitable.\n"
    )
    (docs / "queues.md").write_text("# Queues\n\nqueue.put blocks while the queue is full.\n")
    return docs


def chroma(path: Path) -> Chroma:
    return Chroma(collection_name="docs", embedding_function=EMB, persist_directory=str(path))


def test_folder_to_chroma_to_graph_incrementally(folder: Path, tmp_path: Path) -> None:
    records = SQLiteRecordManager("chroma/docs", tmp_path / "records.sqlite")
    first = ingest_to_store([folder], chroma(tmp_path / "chroma"), records)
    total = first.chunks.added
    assert total > 0 and (first.documents.added, first.chunks.updated) == (2, 0)

    again = ingest_to_store([folder], chroma(tmp_path / "chroma"), records)
    assert (again.chunks.added, again.chunks.unchanged, again.chunks.deleted) == (0, total, 0)

    (folder / "queues.md").write_text("# Queues\n\nqueue.get blocks while the queue is empty.\n")
    edited = ingest_to_store([folder], chroma(tmp_path / "chroma"), records)
    assert edited.documents.updated == 1 and edited.chunks.unchanged == total - 1

    store = chroma(tmp_path / "chroma")  # a new client on the same files
    assert store._collection.count() == total
    graph = build_graph(
        tiers=[
            VectorStoreTier(store, name="chroma"),
            RetrieverTier(BM25Retriever.from_documents(chunk_sources([folder])), name="bm25"),
        ],
        embedder=EMB,
    )
    out = graph.invoke({"query": "what does queue.get do when the queue is empty"})
    top = out["documents"][0]
    assert top.metadata["source"].endswith("queues.md") and "queue.get" in top.page_content
    assert not any("queue.put" in d.page_content for d in out["documents"])

    (folder / "queues.md").unlink()
    pruned = ingest_to_store([folder], chroma(tmp_path / "chroma"), records, cleanup="full")
    assert pruned.documents.deleted == 1
    assert chroma(tmp_path / "chroma")._collection.count() == total - 1


def test_chunk_ids_are_the_embedded_index_chunk_ids(folder: Path) -> None:
    index = build_index([folder], embedder=EMB, progress=False)
    chunks = chunk_sources([folder])
    assert sorted(str(d.id) for d in chunks) == sorted(str(d.id) for d in index.documents())
    metadata = chunks[0].metadata
    assert {"doc_id", "source", "namespace", "parent_id", "section_path"} <= set(metadata)
    assert None not in metadata.values()


def test_a_store_without_an_embedder_is_refused(folder: Path, tmp_path: Path) -> None:
    store = InMemoryVectorStore(EMB)
    store.embedding = None  # type: ignore[assignment]
    with pytest.raises(IngestError, match="no embeddings"):
        ingest_to_store([folder], store, SQLiteRecordManager("m", tmp_path / "r.sqlite"))
