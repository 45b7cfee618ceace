"""The ingest door to Pinecone: chunks upserted with stable ids, in batches, per namespace.

Dense vectors go to the dense index (:func:`upsert_chunks`); BM25 sparse vectors and their
corpus statistics go to the sparse index (:func:`upsert_lexical`).
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
from ragtiller.pinecone.dense import PineconeTier
from ragtiller.pinecone.lexical import PineconeLexicalTier
from ragtiller.pinecone.sparse_bm25 import BM25SparseEncoder, BM25Stats
from ragtiller.pinecone.stats import write_stats

if TYPE_CHECKING:
    from langchain_pinecone import PineconeVectorStore

TEXT_KEY = "text"
"""Metadata key holding a chunk's text (langchain-pinecone's default ``text_key``)."""
DEFAULT_BATCH_SIZE = 100
"""Vectors per upsert request; Pinecone accepts at most 1000 and 2 MB per request."""
MAX_METADATA_BYTES = 40_960
"""Pinecone's limit on one vector's metadata (JSON), in bytes."""
UPSERT_RETRY = RetryPolicy(attempts=4, base_delay_s=0.5)
"""Retries of an upsert batch answered with HTTP 429 (rate limited)."""

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
    """Upsert chunks into the dense Pinecone index with stable ids, one namespace at a time.

    Give it an :class:`EmbeddedIndex` (or its dense store): its chunks and their vectors, or
    LangChain ``Document``s with their ``vectors`` or an ``embedder`` (default: the store's).
    Each vector's id is the chunk id (``Document.id``; a Document without one gets
    ``sha256(source, text)``), so upserting again replaces instead of duplicating. Its
    metadata is the chunk's metadata plus ``text``, ``source``, ``doc_id``, ``parent_id`` and
    ``namespace``; None values are left out (Pinecone rejects nulls; a missing ``parent_id``
    reads back as None). A batch answered with HTTP 429 is retried with backoff; the SDK
    retries 5xx itself.

    Args:
        target: The Pinecone store, or a tier from ``pinecone_tier_from_env`` (a
            :class:`PineconeTier`'s store is used).
        chunks: Documents, or an index or store (all its chunks with their vectors).
        vectors: One vector per Document (not with an index or store).
        embedder: Embeds the Documents when ``vectors`` is None (with retry and backoff).
        namespace: Put every chunk in this namespace; default: each chunk's ``namespace``
            metadata, else ``default`` (as the embedded index does).
        batch_size: Vectors per upsert request, 1 to 1000.
        retry: Attempts and backoff for a batch answered with 429.
        sleep: Called with each backoff delay, in seconds; tests pass a no-op.

    Returns:
        The number of vectors upserted per namespace.

    Raises:
        ConfigurationError: ``target`` is a tier without credentials.
        ValueError: ``batch_size`` out of range, vectors given with a store, or counts differ.
        IngestError: A chunk's metadata cannot be stored in Pinecone, or a batch failed (the
            batches before it were upserted; ids are stable, so running again is safe).
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
    """Upsert BM25 sparse vectors of ``chunks`` into the sparse index, then their statistics.

    The statistics (documents, average length, each term's document frequency) are counted
    over all of ``chunks``, as the embedded bm25s index counts over all its chunks, so pass the
    whole corpus: each call replaces the statistics. After an incremental change, pass the
    changed chunk ids as ``only_ids``: the statistics still count the whole corpus, but only
    those vectors are sent; the others keep weights computed with the previous average length
    (``docs/pinecone.md`` says what that costs). A chunk is indexed under its document
    title, or the header ingest chose, and its text (``indexed_text``), as in the embedded
    tier; a chunk with no term left after analysis is not upserted (no query could match it). Ids, metadata, namespaces,
    batching and retries are :func:`upsert_chunks`'s. Vectors are written before the
    statistics, so a search meanwhile encodes with the statistics of the previous upsert.

    Args:
        target: A ``pinecone`` data-plane ``Index`` of a sparse index, or a tier from
            ``pinecone_lexical_tier_from_env`` (its index is used).
        chunks: Documents, or an embedded index (all its chunks).
        config: Stopwords, stemmer and BM25 parameters; default: the embedded index's, else
            the default ``LexicalConfig``.
        only_ids: Upsert the vectors of these chunk ids only; None: all.
        namespace: As in :func:`upsert_chunks`.
        batch_size: Vectors per upsert request, 1 to 1000.
        retry: Attempts and backoff for a batch answered with 429.
        sleep: Called with each backoff delay, in seconds.

    Returns:
        The number of sparse vectors upserted per namespace.

    Raises:
        ConfigurationError: ``target`` is a tier without credentials, or the BM25 method has
            no sparse form (bm25l, bm25+).
        ValueError: ``batch_size`` out of range.
        IngestError: As in :func:`upsert_chunks`, or the statistics could not be written.
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
    config = config or DEFAULT_LEXICAL
    texts = [indexed_text(d.page_content, d.metadata) for d in documents]
    stats = BM25Stats.build(texts, config)
    sparse = BM25SparseEncoder(stats).encode_documents(texts)
    records = [
        (doc, {"sparse_values": dict(vector)})
        for doc, vector in zip(documents, sparse, strict=True)
        if vector["indices"] and (only_ids is None or doc.id in only_ids)
    ]
    counts = _upsert_records(index, records, namespace, batch_size, retry, sleep)
    _write_stats(index, stats)
    return counts


def _write_stats(index: Any, stats: BM25Stats) -> None:
    from pinecone.exceptions import PineconeException
    from urllib3.exceptions import HTTPError

    try:
        write_stats(index, stats)
    except (PineconeException, HTTPError, OSError) as e:
        raise IngestError(
            f"the sparse vectors were upserted but their BM25 statistics were not ({e}); "
            "searches still encode with the previous statistics: run upsert_lexical again"
        ) from e


def _check_batch_size(batch_size: int) -> None:
    if not 1 <= batch_size <= 1000:
        raise ValueError(f"batch_size must be between 1 and 1000, but got {batch_size}")


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
        record_id, metadata = _record(doc, ns)
        groups.setdefault(ns, []).append({"id": record_id, **values, "metadata": metadata})
    counts: dict[str, int] = {}
    for ns, vectors in groups.items():
        counts[ns] = 0
        for first in range(0, len(vectors), batch_size):
            batch = vectors[first : first + batch_size]
            counts[ns] += _upsert_batch(index, batch, ns, first, retry, sleep)
    return counts


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
    """``metadata`` without None values, checked to hold only what Pinecone stores.

    Raises:
        IngestError: A value is not a string, number, boolean or list of strings.
    """
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


def _record(doc: Document, namespace: str) -> tuple[str, dict[str, Any]]:
    record_id = (
        doc.id
        or hashlib.sha256(
            f"{doc.metadata.get('source', '')}\x00{doc.page_content}".encode()
        ).hexdigest()[:32]
    )
    metadata = {
        **doc.metadata,
        TEXT_KEY: doc.page_content,
        "namespace": namespace,
    }
    metadata = pinecone_metadata(record_id, metadata)
    size = len(json.dumps(metadata).encode())
    if size > MAX_METADATA_BYTES:
        raise IngestError(
            f"chunk {record_id!r}: its metadata (text included) is {size} bytes, over "
            f"Pinecone's {MAX_METADATA_BYTES}; use smaller chunks (chunk_tokens)"
        )
    return record_id, metadata


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
            response = index.upsert(vectors=batch, namespace=namespace)
            return int(response.upserted_count)
        except PineconeApiException as e:
            if e.status != 429 or attempt == retry.attempts:
                raise _batch_error(namespace, first, len(batch), e) from e
            sleep(retry.delay(attempt))
        except (PineconeException, HTTPError, OSError) as e:
            raise _batch_error(namespace, first, len(batch), e) from e
    raise AssertionError("unreachable")  # pragma: no cover


def _batch_error(namespace: str, first: int, size: int, error: Exception) -> IngestError:
    detail = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return IngestError(
        f"upsert to Pinecone namespace {namespace!r} failed at chunks {first}-{first + size - 1}: "
        f"{detail}; earlier batches were stored, and ids are stable, so running again is safe"
    )


__all__ = ("upsert_chunks", "upsert_lexical")
