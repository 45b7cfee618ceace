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
    """Upsert the chunks that changed since the last sync and delete the stale ids, each chunk
    in the namespace its metadata names, under its stable chunk id (so the Pinecone tier returns
    the embedded tiers' ids), embedded by the store's embedder. ``record_manager`` remembers
    what was written (the next sync sends the difference); ``cleanup="full"`` also deletes the
    documents not among ``chunks``. ``batch_size`` chunks per ``add_documents`` call,
    ``concurrency`` batches at once (see :func:`sync_vector_store`)."""
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
    """Read, chunk, embed (with the store's embedder) and upsert ``sources`` into Pinecone:
    the path for corpora beyond one machine's embedder (a
    :class:`~ragtiller.models.ServiceEmbeddings` with the same ``batch_size`` and
    ``concurrency``: each batch one embedding call and one upsert, recorded as soon as it is
    stored, so a run killed midway resumes with what was not recorded; ``docs/pinecone.md``)."""
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
