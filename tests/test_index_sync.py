"""One sync for any LangChain VectorStore: NumpyVectorStore in process, Pinecone over HTTP.

The Pinecone path runs langchain-pinecone and the real ``pinecone`` SDK against the loopback
data-plane emulator in tests/fixtures; nothing inside either SDK is mocked.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fixtures.pinecone_emulator import API_KEY, PineconeEmulator
from langchain_core.documents import Document
from langchain_core.indexing import InMemoryRecordManager, RecordManager
from langchain_pinecone import PineconeVectorStore
from pinecone import Pinecone

from ragtiller.index import ChunkingConfig, EmbeddedIndex, NumpyVectorStore
from ragtiller.ingest import ChangeCounts, SQLiteRecordManager, build_index, sync_vector_store
from ragtiller.ingest.store_sync import SyncRecord, identity_of, plan_sync
from ragtiller.models import HashingEmbedder
from ragtiller.pinecone.upsert import sync_to_pinecone

DIM = 64
EMBEDDER = HashingEmbedder(dim=DIM)
IDENTITY = identity_of(EMBEDDER.model_name, DIM)
CHUNKING = ChunkingConfig(chunk_tokens=12, overlap_tokens=2)


def corpus(**edits: str | None) -> list[Document]:
    texts: dict[str, str | None] = {
        "guide.md": "# Install\n\nRun pip install ragtiller.\n\n# Quota\n\nThe ledger counts chat calls.",
        "notes.txt": "Plain notes: the gate refuses a turn when the budget is spent.",
        "api.rst": "API\n===\n\nCall build_graph with a policy and an index to get a graph back.",
    }
    texts.update(edits)
    namespaces = {"api.rst": "api"}
    return [
        Document(
            page_content=text,
            metadata={"source": name, "namespace": namespaces.get(name, "default")},
        )
        for name, text in texts.items()
        if text is not None
    ]


def chunks(**edits: str | None) -> EmbeddedIndex:
    return build_index(corpus(**edits), embedder=EMBEDDER, chunking=CHUNKING, progress=False)


class CountingStore(NumpyVectorStore):
    """The numpy store, counting the texts written and the ids deleted."""

    def __init__(self) -> None:
        super().__init__(EMBEDDER)
        self.written: list[str] = []
        self.deleted: list[str] = []

    def add_texts(
        self, texts: Any, metadatas: Any = None, *, ids: Any = None, **kwargs: Any
    ) -> list[str]:
        texts = list(texts)
        self.written.extend(texts)
        return super().add_texts(texts, metadatas, ids=ids, **kwargs)

    def delete(self, ids: list[str] | None = None, **kwargs: Any) -> bool | None:
        self.deleted.extend(ids or [])
        return super().delete(ids, **kwargs)


@pytest.fixture(params=["in-memory", "sqlite"])
def records(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RecordManager]:
    if request.param == "in-memory":
        yield InMemoryRecordManager("numpy")
    else:
        manager = SQLiteRecordManager("numpy", tmp_path / "records.sqlite")
        yield manager
        manager.close()


def sync(docs: list[Document], records: RecordManager, store: NumpyVectorStore, **kw: Any) -> Any:
    return sync_vector_store(
        docs, record_manager=records, vector_store=store, embedder_identity=IDENTITY, **kw
    )


def test_numpy_store_first_sync_then_nothing_then_only_the_difference(
    records: RecordManager,
) -> None:
    store = CountingStore()
    first = chunks()
    result = sync(first.documents(), records, store, cleanup="full")
    assert result.chunks == ChangeCounts(added=len(first.documents()))
    assert result.documents == ChangeCounts(added=3)
    assert sorted(store.records.ids) == sorted(first.store.records.ids)

    store.written.clear()
    store.deleted.clear()  # add_texts deletes the ids it is about to write (upsert)
    again = sync(first.documents(), records, store, cleanup="full")
    assert again.chunks == ChangeCounts(unchanged=len(first.documents()))
    assert store.written == [] and store.deleted == []

    edited = chunks(**{"notes.txt": "Plain notes: edited.", "api.rst": None})
    result = sync(edited.documents(), records, store, cleanup="full")
    assert result.documents == ChangeCounts(updated=1, unchanged=1, deleted=1)
    assert store.written == ["Plain notes: edited."]
    assert sorted(store.records.ids) == sorted(edited.store.records.ids)
    for doc in edited.documents():  # the store holds each chunk under its stable id
        (found,) = store.get_by_ids([doc.id or ""])
        assert (found.page_content, found.metadata) == (doc.page_content, doc.metadata)
        row = store.records.row(doc.id or "")
        assert row is not None
        assert np.allclose(store.vectors[row], EMBEDDER.embed_query(doc.page_content), atol=1e-6)


def test_incremental_cleanup_deletes_only_within_the_documents_given(
    records: RecordManager,
) -> None:
    store = CountingStore()
    sync(chunks().documents(), records, store, cleanup="full")
    before = set(store.records.ids)
    only_notes = [
        d
        for d in chunks(**{"notes.txt": "New notes."}).documents()
        if d.metadata["doc_id"] == "notes.txt"
    ]
    result = sync(only_notes, records, store, cleanup="incremental")
    assert result.documents == ChangeCounts(updated=1)
    assert result.chunks.added == 1 and result.chunks.deleted == 1
    assert len(set(store.records.ids) - before) == 1 and len(before - set(store.records.ids)) == 1
    assert {md["doc_id"] for md in store.records.metadatas} == {"guide.md", "notes.txt", "api.rst"}


def test_sqlite_records_survive_a_new_connection(tmp_path: Path) -> None:
    store = CountingStore()
    docs = chunks().documents()
    first = SQLiteRecordManager("numpy", tmp_path / "r.sqlite")
    sync(docs, first, store, cleanup="full")
    first.close()
    second = SQLiteRecordManager("numpy", tmp_path / "r.sqlite")
    store.written.clear()
    assert sync(docs, second, store, cleanup="full").chunks.unchanged == len(docs)
    assert store.written == []
    other = SQLiteRecordManager("other-store", tmp_path / "r.sqlite")
    other.create_schema()
    assert other.list_keys() == []  # namespaces keep stores apart
    second.close()
    other.close()


def test_another_embedder_rewrites_everything(records: RecordManager) -> None:
    store = CountingStore()
    docs = chunks().documents()
    sync(docs, records, store, cleanup="full")
    result = sync_vector_store(
        docs,
        record_manager=records,
        vector_store=store,
        embedder_identity="other@64",
        cleanup="full",
    )
    assert result.chunks == ChangeCounts(updated=len(docs))


def test_plan_counts_match_a_hand_computed_diff() -> None:
    previous = [
        SyncRecord("a", "g1", "1"),
        SyncRecord("b", "g1", "1"),
        SyncRecord("c", "g2", "1"),
        SyncRecord("d", "g3", "1"),
    ]
    current = [SyncRecord("a", "g1", "1"), SyncRecord("b", "g1", "2"), SyncRecord("e", "g4", "1")]
    full = plan_sync(current, previous, "full")
    assert (full.chunks, full.documents) == (
        ChangeCounts(added=1, updated=1, unchanged=1, deleted=2),
        ChangeCounts(added=1, updated=1, deleted=2),
    )
    assert (full.upsert, sorted(full.delete)) == ((1, 2), ["c", "d"])
    incremental = plan_sync(current, previous, "incremental")
    assert incremental.chunks == ChangeCounts(added=1, updated=1, unchanged=1)
    assert incremental.kept_groups == frozenset({"g2", "g3"})
    with pytest.raises(
        ValueError, match=r"cleanup must be one of \('incremental', 'full'\), but got 'scoped'"
    ):
        plan_sync(current, previous, "scoped")  # type: ignore[arg-type]


def test_documents_without_ids_or_doc_id_are_refused() -> None:
    store = CountingStore()
    manager = InMemoryRecordManager("x")
    with pytest.raises(ValueError, match="every document needs an id"):
        sync([Document(page_content="x", metadata={"doc_id": "d"})], manager, store)
    with pytest.raises(ValueError, match="has no doc_id metadata"):
        sync([Document(id="1", page_content="x")], manager, store)


@pytest.fixture
def pinecone() -> Iterator[tuple[PineconeEmulator, PineconeVectorStore]]:
    with (
        PineconeEmulator(dimension=DIM) as emulator,
        Pinecone(api_key=API_KEY).Index(host=emulator.host) as index,
    ):
        yield emulator, PineconeVectorStore(index=index, embedding=EMBEDDER, text_key="text")


def test_pinecone_sync_upserts_changes_and_deletes_stale_ids_per_namespace(
    pinecone: tuple[PineconeEmulator, PineconeVectorStore], tmp_path: Path
) -> None:
    emulator, store = pinecone
    manager = SQLiteRecordManager("pinecone/test", tmp_path / "records.sqlite")
    first = chunks()
    result = sync_to_pinecone(first, store, manager, cleanup="full")
    by_namespace = {"default": 0, "api": 0}
    for md in first.store.records.metadatas:
        by_namespace[md["namespace"]] += 1
    assert result.upserted_by_namespace == by_namespace
    assert {ns: emulator.vector_count(ns) for ns in by_namespace} == by_namespace

    emulator.requests.clear()
    again = sync_to_pinecone(first, store, manager, cleanup="full")
    assert (
        again.chunks.unchanged == len(first.store) and emulator.paths() == []
    )  # no request at all

    edited = chunks(**{"api.rst": "API\n===\n\nCall build_graph; it returns a compiled graph."})
    result = sync_to_pinecone(edited, store, manager, cleanup="full")
    assert result.documents == ChangeCounts(updated=1, unchanged=2)
    upserts = [r.body for r in emulator.requests if r.path == "/vectors/upsert"]
    deletes = [r.body for r in emulator.requests if r.path == "/vectors/delete"]
    assert {u["namespace"] for u in upserts} == {"api"}
    assert {d["namespace"] for d in deletes} == {"api"}
    old_api = {
        i
        for i, md in zip(first.store.records.ids, first.store.records.metadatas, strict=True)
        if md["namespace"] == "api"
    }
    new_api = {
        i
        for i, md in zip(edited.store.records.ids, edited.store.records.metadatas, strict=True)
        if md["namespace"] == "api"
    }
    assert sorted(i for d in deletes for i in d["ids"]) == sorted(old_api - new_api)
    assert emulator.vector_count("api") == len(new_api)

    hits = store.similarity_search("compiled graph", k=10, namespace="api")
    assert {h.id for h in hits} == new_api  # Pinecone ids are the embedded index's chunk ids
    assert (
        hits[0].metadata["doc_id"] == "api.rst" and hits[0].metadata["title"] == "API"
    )  # the RST file's one top-level heading is its title
    manager.close()
