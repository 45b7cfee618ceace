"""Ingest into your own LangChain vector store, incrementally: the chunks (ids, metadata) of
``ragtiller ingest``, written through a record manager, embedded by the store's own embedder."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from langchain_core.documents import Document
from langchain_core.indexing import RecordManager
from langchain_core.vectorstores import VectorStore

from ragtiller.core.filters import DEFAULT_NAMESPACE, TENANT_KEY
from ragtiller.errors import IngestError
from ragtiller.index.units import DEFAULT_CHUNKING, ChunkingConfig
from ragtiller.ingest.chunking import ModelWindow, chunk_documents, chunk_metadata
from ragtiller.ingest.progress import IngestProgress
from ragtiller.ingest.record_manager import SQLiteRecordManager
from ragtiller.ingest.sources import DEFAULT_MAX_FILE_BYTES, Source, load_sources
from ragtiller.ingest.store_sync import Cleanup, SyncResult, identity_of, sync_vector_store
from ragtiller.models.embedders import embedder_identity


def store_metadata(metadata: dict[str, Any]) -> dict[str, Any]:
    """Metadata most stores accept (Chroma's rules): no None or [], a dict as its JSON text."""
    return {
        key: json.dumps(value, sort_keys=True) if isinstance(value, dict) else value
        for key, value in metadata.items()
        if value is not None and value != []
    }


def chunk_sources(
    sources: Iterable[Source],
    *,
    chunking: ChunkingConfig = DEFAULT_CHUNKING,
    namespace: str = DEFAULT_NAMESPACE,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
    progress: IngestProgress | None = None,
    window: ModelWindow | None = None,
) -> list[Document]:
    """The chunks ``ragtiller ingest`` would index, as ``Document``s with their stable ids."""
    bar = progress or IngestProgress(enabled=False)
    documents, _ = load_sources(
        sources,
        namespace=namespace,
        max_file_bytes=max_file_bytes,
        on_total=lambda n: bar.stage("read", n, unit="file"),
        on_read=bar.advance,
    )
    bar.stage("chunk", len(documents), unit="doc")
    _, chunks = chunk_documents(documents, chunking, window)
    bar.advance(len(documents))
    if not chunks:
        raise IngestError("nothing to ingest: the sources hold no readable text")
    return [
        Document(c.text, id=c.id, metadata=store_metadata(chunk_metadata(c, chunking.header)))
        for c in chunks
    ]


def ingest_to_store(
    sources: Iterable[Source],
    store: VectorStore,
    record_manager: RecordManager,
    *,
    cleanup: Cleanup = "incremental",
    chunking: ChunkingConfig = DEFAULT_CHUNKING,
    namespace: str = DEFAULT_NAMESPACE,
    batch_size: int = 100,
) -> SyncResult:
    """Write ``sources`` into ``store``, only what changed; a SQLiteRecordManager also records
    whether chunks carry a ``tenant`` key (False only when the store holds just these runs')."""
    if store.embeddings is None:
        raise IngestError(
            f"the {type(store).__name__} has no embeddings: make it with an embedding function"
        )
    name, dimension = embedder_identity(store.embeddings)
    window = ModelWindow.of(store.embeddings)
    documents = chunk_sources(sources, chunking=chunking, namespace=namespace, window=window)
    tenanted = any(TENANT_KEY in doc.metadata for doc in documents)
    manifest = record_manager if isinstance(record_manager, SQLiteRecordManager) else None
    held: bool | None = None
    if manifest is not None:
        manifest.create_schema()
        held = manifest.tenanted()
        if held is None and not manifest.list_keys(limit=1):
            held = False  # a new store: it will hold only what this run writes
        if tenanted:  # before any chunk is written: a run killed midway still says so
            manifest.record_tenanted(True)
    done = sync_vector_store(
        documents,
        record_manager=record_manager,
        vector_store=store,
        embedder_identity=identity_of(name, dimension),
        cleanup=cleanup,
        batch_size=batch_size,
    )
    if manifest is not None and not tenanted and (cleanup == "full" or held is False):
        manifest.record_tenanted(False)
    return done
