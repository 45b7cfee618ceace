"""The ingest door to Pinecone: chunks upserted with stable ids, in batches, per namespace.

Dense vectors go to the dense index (:func:`upsert_chunks`); BM25 sparse vectors and their
corpus statistics to the sparse index (:func:`upsert_lexical`). See ``docs/pinecone.md``.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from ragtiller.core.retry import RetryPolicy
from ragtiller.errors import ConfigurationError, IngestError, TierUnavailable
from ragtiller.index.dense import NumpyVectorStore
from ragtiller.index.embedded import EmbeddedIndex
from ragtiller.index.lexical import DEFAULT_LEXICAL, LexicalConfig, indexed_text
from ragtiller.index.records import namespace_of
from ragtiller.models.batch_embedding import embed_texts
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

Chunks = Sequence[Document] | NumpyVectorStore | EmbeddedIndex
"""What can be upserted: Documents, or every chunk of an embedded index or its vector store."""


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
    """Upsert chunks into the dense index (a store, or a :class:`PineconeTier`'s) and return
    the vectors written per namespace.

    An :class:`EmbeddedIndex` (or its store) brings its chunks and vectors; Documents need
    ``vectors`` or an ``embedder`` (default: the store's). The id is the chunk id (else
    ``sha256(source, text)``), so upserting again replaces; metadata is the chunk's plus
    ``text`` and ``namespace``, None values left out (Pinecone rejects nulls). ``namespace``
    overrides each chunk's. A batch that fails raises ``IngestError``; the batches before it
    were stored, and running again is safe.
    """
    _check_batch_size(batch_size)
    try:
        store = target.vector_store() if isinstance(target, PineconeTier) else target
    except TierUnavailable as e:
        raise ConfigurationError(f"cannot upsert to Pinecone: {e}") from e
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
    """Upsert BM25 sparse vectors of ``chunks`` into the sparse index (a ``pinecone`` Index, or
    a :class:`PineconeLexicalTier`'s), then their statistics; return the vectors per namespace.

    The statistics count all of ``chunks`` (pass the whole corpus: each call replaces them), as
    bm25s counts all its chunks; ``only_ids`` sends only those vectors after an incremental
    change (the others keep weights of the previous average length). A chunk is indexed as the
    embedded tier indexes it (``indexed_text``); one with no term left is not sent. Vectors are
    written before the statistics, so a search meanwhile encodes with the previous ones. The
    rest is :func:`upsert_chunks`'s; ``config`` defaults to the embedded index's.
    """
    _check_batch_size(batch_size)
    try:
        index = target.index if isinstance(target, PineconeLexicalTier) else target
    except TierUnavailable as e:
        raise ConfigurationError(f"cannot upsert to Pinecone: {e}") from e
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


def _check_batch_size(batch_size: int) -> None:
    if not 1 <= batch_size <= 1000:
        raise ValueError(f"batch_size must be between 1 and 1000, but got {batch_size}")


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
    """``metadata`` without None values, checked to hold only what Pinecone stores
    (``IngestError`` otherwise)."""
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
                text = str(e).strip()
                detail = text.splitlines()[0] if text else type(e).__name__
                raise IngestError(
                    f"upsert to Pinecone namespace {namespace!r} failed at chunks {first}-"
                    f"{first + len(batch) - 1}: {detail}; earlier batches were stored, and ids "
                    "are stable, so running again is safe"
                ) from e
            sleep(retry.delay(attempt))
    raise AssertionError("unreachable")  # pragma: no cover
