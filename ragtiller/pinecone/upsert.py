"""The ingest doors to Pinecone: chunks upserted with stable ids, in batches, per namespace, or
synced (only what changed since the last sync) from an index or sources (``docs/pinecone.md``)."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.indexing import RecordManager

from ragtiller.core.filters import DEFAULT_NAMESPACE
from ragtiller.core.retry import RetryPolicy
from ragtiller.errors import ConfigurationError, IngestError, TierUnavailable, describe_error
from ragtiller.index.dense import NumpyVectorStore
from ragtiller.index.embedded import EmbeddedIndex
from ragtiller.index.lexical import DEFAULT_LEXICAL, LexicalConfig, indexed_text
from ragtiller.index.records import namespace_of
from ragtiller.index.units import DEFAULT_CHUNKING, ChunkingConfig
from ragtiller.ingest.chunking import ModelWindow
from ragtiller.ingest.progress import STORE_STAGES, IngestProgress
from ragtiller.ingest.sources import DEFAULT_MAX_FILE_BYTES, Source
from ragtiller.ingest.store_sync import Cleanup, SyncResult, identity_of, sync_vector_store
from ragtiller.ingest.to_store import chunk_sources
from ragtiller.models.batch_embedding import embed_texts
from ragtiller.models.embedders import embedder_identity
from ragtiller.pinecone.sparse_bm25 import BM25SparseEncoder, BM25Stats, write_stats
from ragtiller.pinecone.tiers import TEXT_KEY, PineconeLexicalTier, PineconeTier

if TYPE_CHECKING:
    from langchain_pinecone import PineconeVectorStore

DEFAULT_BATCH_SIZE = 100
"""Vectors per upsert request; Pinecone accepts at most 1000 and 2 MB per request."""
MAX_METADATA_BYTES = 40_960
"""Pinecone's limit on one vector's metadata (JSON), in bytes."""
UPSERT_RETRY = RetryPolicy(attempts=4, base_delay_s=0.5)
"""Retries of an upsert batch answered with HTTP 429 (rate limited); the SDK retries 5xx."""

Chunks = Sequence[Document] | NumpyVectorStore | EmbeddedIndex  # an index: every chunk


def upsert_chunks(
    target: PineconeVectorStore | PineconeTier,
    chunks: Chunks,
    vectors: npt.ArrayLike | None = None,
    *,
    embedder: Embeddings | None = None,
    namespace: str | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    retry: RetryPolicy = UPSERT_RETRY,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, int]:
    """Upsert an index's chunks and vectors (or Documents with ``vectors`` or an ``embedder``)
    into the dense index under their chunk ids, so running again replaces; vectors per namespace.
    """
    store = _unwrap(target, batch_size, PineconeTier, lambda tier: tier.vector_store())
    documents, matrix = _documents_and_vectors(store, chunks, vectors, embedder)
    records = [(doc, {"values": matrix[row].tolist()}) for row, doc in enumerate(documents)]
    return _upsert_records(store.index, records, namespace, batch_size, retry, sleep)


def upsert_lexical(
    target: Any,
    chunks: Sequence[Document] | EmbeddedIndex,
    *,
    config: LexicalConfig | None = None,
    only_ids: Collection[str] | None = None,
    namespace: str | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    retry: RetryPolicy = UPSERT_RETRY,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, int]:
    """Upsert BM25 sparse vectors of ``chunks`` (the whole corpus: the statistics count all of
    it; ``only_ids``: send only those vectors), then their statistics, which a search meanwhile
    still reads the previous of; vectors per namespace."""
    index = _unwrap(target, batch_size, PineconeLexicalTier, lambda tier: tier.index)
    if isinstance(chunks, EmbeddedIndex):
        config = config or chunks.manifest.lexical
        table = chunks.store.records
        documents = [table.document(row) for row in range(len(table))]
    else:
        documents = list(chunks)
    texts = [indexed_text(d.page_content, d.metadata) for d in documents]
    stats = BM25Stats.build(texts, config or DEFAULT_LEXICAL)
    sparse = BM25SparseEncoder(stats).encode_documents(texts)
    records = [
        (doc, {"sparse_values": dict(vector)})
        for doc, vector in zip(documents, sparse, strict=True)
        if vector["indices"] and (only_ids is None or doc.id in only_ids)
    ]
    counts = _upsert_records(index, records, namespace, batch_size, retry, sleep)
    from pinecone.exceptions import PineconeException
    from urllib3.exceptions import HTTPError

    try:
        write_stats(index, stats)
    except (PineconeException, HTTPError, OSError) as e:
        raise IngestError(
            f"the sparse vectors were upserted but their BM25 statistics were not ({e}); "
            "searches still encode with the previous statistics: run upsert_lexical again"
        ) from e
    return counts


def _unwrap(target: Any, batch_size: int, tier: type[Any], handle: Callable[[Any], Any]) -> Any:
    if not 1 <= batch_size <= 1000:
        raise ValueError(f"batch_size must be between 1 and 1000, but got {batch_size}")
    try:
        return handle(target) if isinstance(target, tier) else target
    except TierUnavailable as e:
        raise ConfigurationError(f"cannot upsert to Pinecone: {e}") from e


def _documents_and_vectors(
    store: PineconeVectorStore,
    chunks: Chunks,
    vectors: npt.ArrayLike | None,
    embedder: Embeddings | None,
) -> tuple[list[Document], npt.NDArray[np.float32]]:
    if isinstance(chunks, EmbeddedIndex):
        chunks = chunks.store
    if isinstance(chunks, NumpyVectorStore):
        if vectors is not None:
            raise ValueError("pass vectors with Documents only: an index or store has its own")
        records = chunks.records
        return [records.document(row) for row in range(len(records))], chunks.vectors
    documents = list(chunks)
    if not documents:
        return [], np.empty((0, 0), dtype=np.float32)
    if vectors is None:
        embedder = embedder or store.embeddings
        if embedder is None:
            raise ValueError("pass vectors or an embedder: the store has no embedder")
        texts = [indexed_text(doc.page_content, doc.metadata) for doc in documents]
        matrix = embed_texts(embedder, texts, progress=False)
    else:
        matrix = np.asarray(vectors, dtype=np.float32)
    if matrix.ndim != 2 or matrix.shape[0] != len(documents):
        raise ValueError(
            f"got vectors of shape {matrix.shape} for {len(documents)} documents; "
            "expected one row per document"
        )
    return documents, matrix


def pinecone_metadata(chunk_id: str | None, metadata: Mapping[str, Any]) -> dict[str, Any]:
    """``metadata`` without None values, checked to hold only what Pinecone stores."""
    kept = {k: v for k, v in metadata.items() if v is not None}
    for key, value in kept.items():
        scalar = isinstance(value, str | bool | int | float)
        strings = isinstance(value, list) and all(isinstance(item, str) for item in value)
        if not (scalar or strings):
            raise IngestError(
                f"chunk {chunk_id!r}: metadata {key!r} is a {type(value).__name__}; Pinecone "
                "stores only strings, numbers, booleans and lists of strings"
            )
    return kept


def _upsert_records(
    index: Any,
    records: list[tuple[Document, dict[str, Any]]],
    namespace: str | None,
    batch_size: int,
    retry: RetryPolicy,
    sleep: Callable[[float], None],
) -> dict[str, int]:
    groups: dict[str, list[dict[str, Any]]] = {}
    for doc, values in records:
        ns = namespace if namespace is not None else namespace_of(doc.metadata)
        source = doc.metadata.get("source", "")
        record_id = (
            doc.id or hashlib.sha256(f"{source}\x00{doc.page_content}".encode()).hexdigest()[:32]
        )
        metadata = {**doc.metadata, TEXT_KEY: doc.page_content, "namespace": ns}
        metadata = pinecone_metadata(record_id, metadata)
        size = len(json.dumps(metadata).encode())
        if size > MAX_METADATA_BYTES:
            raise IngestError(
                f"chunk {record_id!r}: its metadata (text included) is {size} bytes, over "
                f"Pinecone's {MAX_METADATA_BYTES}; use smaller chunks (chunk_tokens)"
            )
        groups.setdefault(ns, []).append({"id": record_id, **values, "metadata": metadata})
    counts: dict[str, int] = {}
    for ns, vectors in groups.items():
        counts[ns] = 0
        for first in range(0, len(vectors), batch_size):
            batch = vectors[first : first + batch_size]
            counts[ns] += _upsert_batch(index, batch, ns, first, retry, sleep)
    return counts


def _upsert_batch(
    index: Any,
    batch: list[dict[str, Any]],
    namespace: str,
    first: int,
    retry: RetryPolicy,
    sleep: Callable[[float], None],
) -> int:
    from pinecone.exceptions import PineconeApiException, PineconeException
    from urllib3.exceptions import HTTPError

    for attempt in range(1, retry.attempts + 1):
        try:
            return int(index.upsert(vectors=batch, namespace=namespace).upserted_count)
        except (PineconeException, HTTPError, OSError) as e:
            rate_limited = isinstance(e, PineconeApiException) and e.status == 429
            if not rate_limited or attempt == retry.attempts:
                raise IngestError(
                    f"upsert to Pinecone namespace {namespace!r} failed at chunks {first}-"
                    f"{first + len(batch) - 1}: {describe_error(e)}; earlier batches were stored, and ids "
                    "are stable, so running again is safe"
                ) from e
            sleep(retry.delay(attempt))
    raise AssertionError("unreachable")  # pragma: no cover


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
    """Upsert the chunks changed since the last sync and delete the stale ids."""
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
    """Read, chunk, embed and sync ``sources``; each batch recorded once stored (resumable)."""
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
