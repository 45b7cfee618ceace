"""Folder -> your own store -> graph: ``ingest_to_store`` into an embedded, persistent Chroma."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_chroma import Chroma
from langchain_community.retrievers import BM25Retriever
from langchain_core.documents import Document
from langchain_core.vectorstores import InMemoryVectorStore

from ragtiller import InputError, build_graph
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
    assert records.tenanted() is False  # a new store, and no chunk carries a tenant
    graph = build_graph(
        require_tenant=records.tenanted(),
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


def tenant_doc(source: str, text: str, **metadata: str) -> Document:
    return Document(text, metadata={"source": source, **metadata})


def test_the_records_file_says_whether_the_store_holds_tenants(tmp_path: Path) -> None:
    """What ``build_graph(require_tenant=records.tenanted())`` reads: True once a run wrote a
    chunk with a tenant, and kept by later untenanted incremental runs; False only for a store
    that holds what untenanted runs wrote; None (default deny) when it cannot tell."""
    store, records = InMemoryVectorStore(EMB), SQLiteRecordManager("m", tmp_path / "r.sqlite")
    plain = [tenant_doc("a.md", "# A\n\nThe server listens on port 8000.")]
    tenanted = [tenant_doc("b.md", "# B\n\nThe acme server listens on 7000.", tenant="acme")]
    ingest_to_store(plain, store, records)
    assert records.tenanted() is False
    ingest_to_store(tenanted, store, records)
    assert records.tenanted() is True
    ingest_to_store(plain, store, records)  # incremental: b.md's chunks are still there
    assert records.tenanted() is True
    graph = build_graph(tiers=[store], embedder=EMB, require_tenant=records.tenanted())
    with pytest.raises(InputError, match="serves several tenants"):
        graph.invoke({"query": "which port does the server listen on"})
    ingest_to_store(plain, store, records, cleanup="full")  # the store holds a.md alone
    assert records.tenanted() is False
    assert build_graph(tiers=[store], embedder=EMB, require_tenant=records.tenanted()).invoke(
        {"query": "which port does the server listen on"}
    )["documents"]
    older = SQLiteRecordManager("older", tmp_path / "r.sqlite")  # written before it was recorded
    older.create_schema()
    older.update(["x"], group_ids=["g"])
    ingest_to_store(plain, InMemoryVectorStore(EMB), older)
    assert older.tenanted() is None


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
