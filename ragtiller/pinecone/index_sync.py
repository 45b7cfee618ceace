"""Incremental sync into Pinecone, one namespace at a time: the embedded index's chunks, or
sources read and chunked here and embedded by the store's embedder (an embedding service)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from langchain_core.documents import Document
from langchain_core.indexing import RecordManager

from ragtiller.core.filters import DEFAULT_NAMESPACE
from ragtiller.errors import IngestError
from ragtiller.index.embedded import EmbeddedIndex
from ragtiller.index.units import DEFAULT_CHUNKING, ChunkingConfig
from ragtiller.ingest.chunking import ModelWindow
from ragtiller.ingest.progress import STORE_STAGES, IngestProgress
from ragtiller.ingest.sources import DEFAULT_MAX_FILE_BYTES, Source
from ragtiller.ingest.store_sync import Cleanup, SyncResult, identity_of, sync_vector_store
from ragtiller.ingest.to_store import chunk_sources
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
    concurrency: int = 1,
    progress: IngestProgress | None = None,
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
        batch_size: Chunks per ``add_documents`` call (one embedding call, when it is at most
            the embedder's batch size).
        concurrency: Batches written at once (see :func:`sync_vector_store`).
        progress: Counts the chunks written.

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
        concurrency=concurrency,
        progress=progress,
    )


def ingest_to_pinecone(
    sources: Iterable[Source],
    store: PineconeVectorStore,
    record_manager: RecordManager,
    *,
    cleanup: Cleanup = "incremental",
    chunking: ChunkingConfig = DEFAULT_CHUNKING,
    namespace: str = DEFAULT_NAMESPACE,
    batch_size: int = 32,
    concurrency: int = 1,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
    progress: bool = True,
) -> SyncResult:
    """Read, chunk, embed (with the store's embedder) and upsert ``sources`` into Pinecone.

    The path for corpora beyond one machine's embedder: give the store a
    :class:`~ragtiller.models.ServiceEmbeddings` and the same ``batch_size`` and
    ``concurrency``, so each batch is one embedding call and one upsert, ``concurrency`` in
    flight, recorded in ``record_manager`` as soon as it is stored. Killed midway, the next
    run with the same sources embeds only what was not recorded (see ``docs/pinecone.md``).

    Args:
        sources: Files, directories and/or LangChain ``Document``s.
        store: A ``PineconeVectorStore`` whose embedding embeds what is written.
        record_manager: Remembers what was written (e.g. a
            :class:`~ragtiller.ingest.record_manager.SQLiteRecordManager` file).
        cleanup: As in :func:`sync_to_pinecone`.
        chunking: As for ``ragtiller ingest``.
        namespace: For documents that name none in their metadata.
        batch_size: Chunks per embedding call and upsert.
        concurrency: Batches in flight.
        max_file_bytes: Larger files are skipped.
        progress: One bar over read, chunk and write.

    Returns:
        Counts per document and chunk, and per namespace.

    Raises:
        IngestError: Nothing to ingest, a missing path, metadata Pinecone cannot store, or a
            store without an embedding.
        EmbeddingError: The embedder kept failing on a batch (the batches before it stay
            written and recorded).
    """
    with IngestProgress(enabled=progress, stages=STORE_STAGES) as bar:
        chunks = chunk_sources(
            sources,
            chunking=chunking,
            namespace=namespace,
            max_file_bytes=max_file_bytes,
            progress=bar,
            window=ModelWindow.of(store.embeddings),
        )
        return sync_to_pinecone(
            chunks,
            store,
            record_manager,
            cleanup=cleanup,
            batch_size=batch_size,
            concurrency=concurrency,
            progress=bar,
        )
