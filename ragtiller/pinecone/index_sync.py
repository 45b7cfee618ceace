"""Incremental sync of the embedded index's chunks into Pinecone, one namespace at a time."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from langchain_core.documents import Document
from langchain_core.indexing import RecordManager

from ragtiller.errors import IngestError
from ragtiller.index.embedded import EmbeddedIndex
from ragtiller.ingest.store_sync import Cleanup, SyncResult, identity_of, sync_vector_store
from ragtiller.models.embedders import embedder_identity
from ragtiller.pinecone.upsert import pinecone_metadata

if TYPE_CHECKING:
    from langchain_pinecone import PineconeVectorStore


def sync_to_pinecone(
    chunks: EmbeddedIndex | Sequence[Document],
    store: PineconeVectorStore,
    record_manager: RecordManager,
    *,
    cleanup: Cleanup = "incremental",
    batch_size: int = 100,
) -> SyncResult:
    """Upsert the chunks that changed since the last sync and delete the stale ids, per namespace.

    Each chunk goes to the Pinecone namespace its ``namespace`` metadata names, under its stable
    chunk id, so the Pinecone dense tier returns the same ids as the embedded tiers. Metadata
    values that are None are left out (Pinecone rejects nulls). The record manager remembers
    what was written, so the next sync sends only the difference.

    Args:
        chunks: The embedded index (all its chunks), or chunk ``Document``s with ids and
            ``doc_id`` metadata.
        store: A ``langchain_pinecone.PineconeVectorStore``; its embedder embeds what is sent.
        record_manager: Remembers the written records between runs (e.g.
            :class:`~ragtiller.ingest.record_manager.SQLiteRecordManager`).
        cleanup: ``incremental``: delete stale chunks of the documents synced;
            ``full``: also delete documents not among ``chunks``.
        batch_size: Chunks per ``add_documents`` call.

    Returns:
        Counts per document and chunk, and per namespace.

    Raises:
        IngestError: A metadata value is neither a string, number, boolean nor a list of
            strings, or ``store`` has no embedding.
    """
    documents = chunks.documents() if isinstance(chunks, EmbeddedIndex) else list(chunks)
    cleaned = [
        Document(id=d.id, page_content=d.page_content, metadata=pinecone_metadata(d.id, d.metadata))
        for d in documents
    ]
    if store.embeddings is None:
        raise IngestError("the Pinecone store has no embedding; pass embedding= when making it")
    name, dimension = embedder_identity(store.embeddings)
    return sync_vector_store(
        cleaned,
        record_manager=record_manager,
        vector_store=store,
        embedder_identity=identity_of(name, dimension),
        cleanup=cleanup,
        namespaced=True,
        batch_size=batch_size,
        write_kwargs={"async_req": False},
    )
