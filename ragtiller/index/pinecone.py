"""Pinecone as the dense tier, through ``langchain_pinecone.PineconeVectorStore``.

One Pinecone namespace per policy route: a route's ``namespace`` (or list of them) is what the
graph passes to :meth:`PineconeTier.search`. See ``docs/pinecone.md``.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent import futures
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import numpy.typing as npt
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import VectorStore

from ragtiller._retry import RetryPolicy
from ragtiller.errors import ConfigurationError, IngestError, RagtillerError, TierUnavailable
from ragtiller.index._embedding import embed_texts
from ragtiller.index._records import HIT_FIELDS, namespace_of
from ragtiller.index.dense import NumpyVectorStore
from ragtiller.index.embedded import EmbeddedIndex
from ragtiller.types import Hit, Tier

if TYPE_CHECKING:
    from langchain_pinecone import PineconeVectorStore

T = TypeVar("T")

logger = logging.getLogger("ragtiller.index.pinecone")

INSTALL_HINT = "the Pinecone tier needs langchain-pinecone: pip install 'ragtiller[pinecone]'"
TEXT_KEY = "text"
"""Metadata key holding a chunk's text (langchain-pinecone's default ``text_key``)."""
DEFAULT_BATCH_SIZE = 100
"""Vectors per upsert request; Pinecone accepts at most 1000 and 2 MB per request."""
MAX_METADATA_BYTES = 40_960
"""Pinecone's limit on one vector's metadata (JSON), in bytes."""
UPSERT_RETRY = RetryPolicy(attempts=4, base_delay_s=0.5)
"""Retries of an upsert batch answered with HTTP 429 (rate limited)."""
API_KEY_ENV = "PINECONE_API_KEY"
INDEX_ENV = "PINECONE_INDEX"
HOST_ENV = "PINECONE_HOST"


class PineconeTierError(RagtillerError, ConnectionError):
    """Pinecone did not answer a tier search: an HTTP error, a refused connection, a timeout.

    Attributes:
        status_code: The HTTP status (429, 503 ...), or None when no status came back.
        namespace: The namespace being searched.
    """

    def __init__(self, message: str, *, status_code: int | None, namespace: str) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.namespace = namespace


class PineconeTimeoutError(PineconeTierError, TimeoutError):
    """No answer within the tier's ``timeout_s`` (SDK-internal retries included)."""


class PineconeTier:
    """The dense tier served by a Pinecone index (cosine metric) instead of the numpy matrix.

    Each namespace asked for is one query (``similarity_search_by_vector_with_score`` with
    ``namespace`` and ``filter``), all run in parallel. With several namespaces the results
    are merged by score (cosine scores from one index share one scale), an id found in two
    namespaces is kept once with its best score, and the best ``k`` are returned; the
    namespace that served a hit is in ``metadata["namespace"]``. ``namespaces=None`` searches
    every namespace the index holds (listed by ``describe_index_stats``, one more request),
    as the embedded dense tier does.

    Hits: ``id`` is the vector id (the chunk id, see :func:`upsert_chunks`), ``text`` the
    ``text`` metadata, ``score`` Pinecone's cosine, ``doc_id`` / ``parent_id`` / ``source``
    their metadata (``doc_id`` defaults to the id, ``parent_id`` to None), ``metadata`` the
    rest. Matches without ``text`` metadata are skipped by langchain-pinecone. ``filter`` is
    Pinecone's filter language; plain ``{key: value}`` equality behaves the same on the
    embedded tier.

    Calls run in daemon worker threads under one deadline, ``timeout_s``, for both
    :meth:`search` and :meth:`asearch` (which never blocks the event loop). The pinecone SDK
    retries HTTP 500/502/503/504 itself (5 retries, exponential backoff, about 8 s in all)
    and does not retry 429. A call that outlives the deadline is abandoned, not stopped: its
    thread ends when the SDK gives up.

    Args:
        store: A ``PineconeVectorStore``, or a zero-argument function making one on first
            search (so that building the tier does no network I/O); a failing function is
            called again on the next search.
        name: The tier's name; ``dense`` replaces the embedded dense tier.
        timeout_s: Deadline for one search, all namespaces included, in seconds.

    Raises:
        ValueError: ``timeout_s`` is not positive.

    Example:
        >>> def connect():  # called on the first search, not here
        ...     raise AssertionError("no I/O when the tier is built")
        >>> tier = PineconeTier(connect, timeout_s=2.0)
        >>> (tier.name, tier.needs_vector, tier.timeout_s)
        ('dense', True, 2.0)
    """

    needs_vector = True

    def __init__(
        self,
        store: PineconeVectorStore | Callable[[], PineconeVectorStore],
        *,
        name: str = "dense",
        timeout_s: float = 5.0,
    ) -> None:
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0, but got {timeout_s}")
        self.name = name
        self.timeout_s = timeout_s
        self._store: PineconeVectorStore | None = None
        self._make_store: Callable[[], PineconeVectorStore] | None = None
        if isinstance(store, VectorStore):
            self._store = store
        else:
            self._make_store = store
        self._lock = threading.Lock()

    @property
    def store(self) -> PineconeVectorStore:
        """The vector store, made on first use when the tier was given a function."""
        with self._lock:
            if self._store is None:
                assert self._make_store is not None
                self._store = self._make_store()
            return self._store

    def search(
        self,
        *,
        query: str,
        vector: Sequence[float] | None,
        k: int,
        namespaces: Sequence[str] | None = None,
        filter: Mapping[str, Any] | None = None,
    ) -> list[Hit]:
        """At most ``k`` hits, best first, scored by Pinecone's cosine similarity.

        Args:
            query: Unused (the tier reads the vector).
            vector: The query vector.
            k: Hits wanted, per namespace and in all.
            namespaces: Namespaces to search; None: every namespace of the index.
            filter: A Pinecone metadata filter.

        Raises:
            ValueError: ``vector`` is None or ``k`` < 1.
            PineconeTierError: Pinecone answered with an error (``status_code`` set) or not
                at all; :class:`PineconeTimeoutError` when the deadline passed.
        """
        floats = _query_vector(vector, k)
        deadline = time.monotonic() + self.timeout_s
        if namespaces is None:
            namespaces = _wait(_start(self._list_namespaces), deadline, self.timeout_s, "*")
        calls = self._start_queries(floats, k, namespaces, filter)
        return _merge([(ns, _wait(call, deadline, self.timeout_s, ns)) for ns, call in calls], k)

    async def asearch(
        self,
        *,
        query: str,
        vector: Sequence[float] | None,
        k: int,
        namespaces: Sequence[str] | None = None,
        filter: Mapping[str, Any] | None = None,
    ) -> list[Hit]:
        """Async twin of :meth:`search`: the same calls and deadline, awaited off the loop."""
        floats = _query_vector(vector, k)
        deadline = time.monotonic() + self.timeout_s
        if namespaces is None:
            namespaces = await _await(_start(self._list_namespaces), deadline, self.timeout_s, "*")
        calls = self._start_queries(floats, k, namespaces, filter)
        return _merge(
            [(ns, await _await(call, deadline, self.timeout_s, ns)) for ns, call in calls], k
        )

    def _start_queries(
        self,
        vector: list[float],
        k: int,
        namespaces: Sequence[str],
        filter: Mapping[str, Any] | None,
    ) -> list[tuple[str, futures.Future[list[tuple[Document, float]]]]]:
        def query(namespace: str) -> list[tuple[Document, float]]:
            return self.store.similarity_search_by_vector_with_score(
                vector, k=k, namespace=namespace, filter=dict(filter) if filter else None
            )

        unique = list(dict.fromkeys(namespaces))
        return [(ns, _start(functools.partial(query, ns))) for ns in unique]

    def _list_namespaces(self) -> list[str]:
        stats = self.store.index.describe_index_stats()
        return [name for name, summary in stats.namespaces.items() if summary.vector_count]


class UnavailableTier:
    """A tier that cannot run, for a known reason: every search raises :class:`TierUnavailable`.

    The graph reports such a tier as ``skipped`` with the reason (e.g. ``no-credentials``).

    Args:
        name: The tier's name.
        reason: The short reason shown in the stage event.
        message: The longer explanation, with the remedy.
        needs_vector: Whether the tier it stands for reads the query vector.

    Example:
        >>> tier = UnavailableTier("dense", "no-credentials", "set PINECONE_API_KEY")
        >>> tier.search(query="q", vector=None, k=1)
        Traceback (most recent call last):
        ...
        ragtiller.errors.TierUnavailable: set PINECONE_API_KEY
    """

    def __init__(self, name: str, reason: str, message: str, *, needs_vector: bool = True) -> None:
        self.name = name
        self.reason = reason
        self.message = message
        self.needs_vector = needs_vector

    def search(
        self,
        *,
        query: str,
        vector: Sequence[float] | None,
        k: int,
        namespaces: Sequence[str] | None = None,
        filter: Mapping[str, Any] | None = None,
    ) -> list[Hit]:
        """Raise :class:`TierUnavailable`.

        Raises:
            TierUnavailable: Always, with this tier's reason.
        """
        raise TierUnavailable(self.reason, self.message)

    async def asearch(
        self,
        *,
        query: str,
        vector: Sequence[float] | None,
        k: int,
        namespaces: Sequence[str] | None = None,
        filter: Mapping[str, Any] | None = None,
    ) -> list[Hit]:
        """Raise :class:`TierUnavailable`.

        Raises:
            TierUnavailable: Always, with this tier's reason.
        """
        raise TierUnavailable(self.reason, self.message)


class FallbackTier:
    """Serve from ``primary``; when it raises one of ``fallback_on``, serve from ``fallback``.

    Typical use: Pinecone first, the embedded dense tier when Pinecone has no credentials.
    Every hit's ``metadata["served_by"]`` names the tier that served it (``primary_label`` or
    ``fallback_label``); hits served by the fallback also carry ``metadata["fallback_reason"]``,
    the :class:`TierUnavailable` reason or the exception's class name. By default only
    :class:`TierUnavailable` (a known, expected absence) falls back: an outage of a configured
    primary (:class:`PineconeTierError`) still raises, so the graph reports it as an error,
    unless it is listed in ``fallback_on``. An error of the fallback itself propagates.

    Args:
        primary: The tier tried first.
        fallback: The tier used when ``primary`` raises one of ``fallback_on``.
        name: The tier's name; default: the primary's.
        primary_label: ``served_by`` value of the primary's hits.
        fallback_label: ``served_by`` value of the fallback's hits.
        fallback_on: Exception types that send the search to the fallback.

    Example:
        >>> primary = UnavailableTier("dense", "no-credentials", "no key")
        >>> backup = UnavailableTier("dense", "offline", "no index either")
        >>> tier = FallbackTier(primary, backup)
        >>> tier.search(query="q", vector=None, k=1)
        Traceback (most recent call last):
        ...
        ragtiller.errors.TierUnavailable: no index either
    """

    def __init__(
        self,
        primary: Tier,
        fallback: Tier,
        *,
        name: str | None = None,
        primary_label: str = "primary",
        fallback_label: str = "fallback",
        fallback_on: tuple[type[Exception], ...] = (TierUnavailable,),
    ) -> None:
        self.primary = primary
        self.fallback = fallback
        self.name = name or primary.name
        self.needs_vector = primary.needs_vector or fallback.needs_vector
        self.primary_label = primary_label
        self.fallback_label = fallback_label
        self.fallback_on = fallback_on

    def search(
        self,
        *,
        query: str,
        vector: Sequence[float] | None,
        k: int,
        namespaces: Sequence[str] | None = None,
        filter: Mapping[str, Any] | None = None,
    ) -> list[Hit]:
        """The primary's hits, or the fallback's when the primary raised one of ``fallback_on``.

        Raises:
            Exception: Whatever the fallback raises, or the primary raises outside
                ``fallback_on``.
        """
        args: dict[str, Any] = {
            "query": query,
            "vector": vector,
            "k": k,
            "namespaces": namespaces,
            "filter": filter,
        }
        try:
            return _served_by(self.primary.search(**args), self.primary_label)
        except self.fallback_on as e:
            self._log(e)
            return _served_by(self.fallback.search(**args), self.fallback_label, _reason(e))

    async def asearch(
        self,
        *,
        query: str,
        vector: Sequence[float] | None,
        k: int,
        namespaces: Sequence[str] | None = None,
        filter: Mapping[str, Any] | None = None,
    ) -> list[Hit]:
        """Async twin of :meth:`search`."""
        args: dict[str, Any] = {
            "query": query,
            "vector": vector,
            "k": k,
            "namespaces": namespaces,
            "filter": filter,
        }
        try:
            return _served_by(await self.primary.asearch(**args), self.primary_label)
        except self.fallback_on as e:
            self._log(e)
            hits = await self.fallback.asearch(**args)
            return _served_by(hits, self.fallback_label, _reason(e))

    def _log(self, error: Exception) -> None:
        logger.info(
            "tier %r: %s unavailable (%s), serving from %s",
            self.name,
            self.primary_label,
            _reason(error),
            self.fallback_label,
        )


def pinecone_tier_from_env(
    embedder: Embeddings,
    env: Mapping[str, str] = os.environ,
    *,
    name: str = "dense",
    timeout_s: float = 5.0,
) -> PineconeTier | UnavailableTier:
    """A Pinecone tier configured from ``PINECONE_API_KEY`` and ``PINECONE_HOST`` or ``PINECONE_INDEX``.

    ``PINECONE_HOST`` (the index's data-plane host, shown by ``describe_index``) is preferred:
    no control-plane call is ever made. With only ``PINECONE_INDEX`` (the index name) the
    host is looked up on the first search. No network I/O happens here.

    Args:
        embedder: The embedder the index was built with (the store keeps it for text queries).
        env: Where the variables are read.
        name: The tier's name.
        timeout_s: Deadline for one search, in seconds.

    Returns:
        A :class:`PineconeTier`; without ``PINECONE_API_KEY``, an :class:`UnavailableTier`
        whose searches raise ``TierUnavailable("no-credentials")``.

    Raises:
        ConfigurationError: The key is set but neither ``PINECONE_HOST`` nor ``PINECONE_INDEX``.
        ImportError: langchain-pinecone is not installed (the message says how to install it).

    Example:
        >>> from ragtiller.index import HashingEmbedder
        >>> tier = pinecone_tier_from_env(HashingEmbedder(dim=8), env={})
        >>> (tier.name, tier.reason)
        ('dense', 'no-credentials')
    """
    api_key = env.get(API_KEY_ENV, "")
    host = env.get(HOST_ENV, "")
    index_name = env.get(INDEX_ENV, "")
    if not api_key:
        logger.info("tier %r: %s is not set; the Pinecone tier is skipped", name, API_KEY_ENV)
        return UnavailableTier(
            name,
            "no-credentials",
            f"Pinecone tier {name!r}: set {API_KEY_ENV} (and "
            f"{HOST_ENV} or {INDEX_ENV}) to search Pinecone",
        )
    if not host and not index_name:
        raise ConfigurationError(
            f"{API_KEY_ENV} is set but neither {HOST_ENV} nor {INDEX_ENV} is: set {HOST_ENV} to "
            f"the index host (see describe_index) or {INDEX_ENV} to the index name"
        )
    _require_langchain_pinecone()

    def make_store() -> PineconeVectorStore:
        from langchain_pinecone import PineconeVectorStore
        from pinecone import Pinecone

        client = Pinecone(api_key=api_key, source_tag="langchain")
        index = client.Index(host=host) if host else client.Index(name=index_name)
        return PineconeVectorStore(index=index, embedding=embedder, text_key=TEXT_KEY)

    return PineconeTier(make_store, name=name, timeout_s=timeout_s)


def upsert_chunks(
    target: PineconeVectorStore | PineconeTier | UnavailableTier,
    chunks: Sequence[Document] | NumpyVectorStore | EmbeddedIndex,
    vectors: npt.ArrayLike | None = None,
    *,
    embedder: Embeddings | None = None,
    namespace: str | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    retry: RetryPolicy = UPSERT_RETRY,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, int]:
    """Upsert chunks into Pinecone with stable ids, one namespace at a time, in batches.

    The ingest door for Pinecone: give it an :class:`EmbeddedIndex` (or its dense store): its
    chunks and their vectors, or LangChain ``Document``s with their ``vectors`` or an ``embedder``
    (default: the store's). Each vector's id is the chunk id (``Document.id``; a Document
    without one gets ``sha256(source, text)``), so upserting again replaces instead of
    duplicating. Its metadata is the chunk's metadata plus ``text``, ``source``, ``doc_id``,
    ``parent_id`` and ``namespace``; None values are left out (Pinecone rejects nulls; a
    missing ``parent_id`` reads back as None). A batch answered with HTTP 429 is retried
    with backoff; the SDK retries 5xx itself.

    Args:
        target: The Pinecone store, or a tier from :func:`pinecone_tier_from_env` (a
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
        ConfigurationError: ``target`` is an :class:`UnavailableTier` (no credentials).
        ValueError: ``batch_size`` out of range, vectors given with a store, or counts differ.
        IngestError: A chunk's metadata cannot be stored in Pinecone, or a batch failed (the
            batches before it were upserted; ids are stable, so running again is safe).
    """
    if not 1 <= batch_size <= 1000:
        raise ValueError(f"batch_size must be between 1 and 1000, but got {batch_size}")
    if isinstance(target, UnavailableTier):
        raise ConfigurationError(f"cannot upsert to Pinecone: {target.message}")
    store = target.store if isinstance(target, PineconeTier) else target
    documents, matrix = _documents_and_vectors(store, chunks, vectors, embedder)
    groups: dict[str, list[tuple[str, list[float], dict[str, Any]]]] = {}
    for row, doc in enumerate(documents):
        ns = namespace if namespace is not None else namespace_of(doc.metadata)
        record_id, metadata = _record(doc, ns)
        groups.setdefault(ns, []).append((record_id, matrix[row].tolist(), metadata))
    counts: dict[str, int] = {}
    for ns, records in groups.items():
        counts[ns] = 0
        for first in range(0, len(records), batch_size):
            batch = records[first : first + batch_size]
            counts[ns] += _upsert_batch(store, batch, ns, first, retry, sleep)
    return counts


def _require_langchain_pinecone() -> None:
    try:
        import langchain_pinecone  # noqa: F401
    except ImportError as e:
        raise ImportError(INSTALL_HINT) from e


def _query_vector(vector: Sequence[float] | None, k: int) -> list[float]:
    """The query vector as plain floats (the SDK refuses numpy scalars), once both are checked."""
    if vector is None:
        raise ValueError("the Pinecone tier needs a query vector, but got None")
    if k < 1:
        raise ValueError(f"k must be > 0, but got {k}")
    return [float(x) for x in vector]


def _start(fn: Callable[[], T]) -> futures.Future[T]:
    """Run ``fn`` in a new daemon thread (one that can never delay interpreter exit)."""
    future: futures.Future[T] = futures.Future()

    def run() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(fn())
        except BaseException as e:  # handed to whoever waits on the future
            future.set_exception(e)

    threading.Thread(target=run, name="ragtiller-pinecone", daemon=True).start()
    return future


def _wait(future: futures.Future[T], deadline: float, timeout_s: float, namespace: str) -> T:
    futures.wait([future], timeout=max(0.0, deadline - time.monotonic()))
    if not future.done():
        raise _timeout(timeout_s, namespace)
    return _result(future.result, namespace)


async def _await(future: futures.Future[T], deadline: float, timeout_s: float, namespace: str) -> T:
    waiter = asyncio.wrap_future(future)
    done, _ = await asyncio.wait([waiter], timeout=max(0.0, deadline - time.monotonic()))
    if not done:
        waiter.cancel()
        raise _timeout(timeout_s, namespace)
    return _result(waiter.result, namespace)  # read from the waiter, so asyncio sees it read


def _timeout(timeout_s: float, namespace: str) -> PineconeTimeoutError:
    return PineconeTimeoutError(
        f"Pinecone did not answer within {timeout_s:g} s (namespace {namespace!r}); the SDK "
        "retries HTTP 5xx internally, so a failing service can look like a slow one",
        status_code=None,
        namespace=namespace,
    )


def _result(get: Callable[[], T], namespace: str) -> T:
    """The result of a finished call, with transport and API failures as :class:`PineconeTierError`."""
    from pinecone.exceptions import PineconeApiException, PineconeException
    from urllib3.exceptions import HTTPError

    try:
        return get()
    except PineconeApiException as e:
        status = int(e.status) if e.status else None
        reason = f" {e.reason}" if e.reason else ""
        raise PineconeTierError(
            f"Pinecone answered HTTP {status}{reason} (namespace {namespace!r})",
            status_code=status,
            namespace=namespace,
        ) from e
    except (PineconeException, HTTPError, OSError) as e:
        raise PineconeTierError(
            f"Pinecone request failed (namespace {namespace!r}): {e}",
            status_code=None,
            namespace=namespace,
        ) from e


def _merge(results: list[tuple[str, list[tuple[Document, float]]]], k: int) -> list[Hit]:
    """Hits of every namespace, best score first, each id once (its best), at most ``k``.

    Ties keep the order of the namespaces given, then Pinecone's order within a namespace.
    """
    best: dict[str, Hit] = {}
    for namespace, pairs in results:
        for doc, score in pairs:
            hit = _hit(doc, score, namespace)
            if hit["id"] not in best or hit["score"] > best[hit["id"]]["score"]:
                best[hit["id"]] = hit
    return sorted(best.values(), key=lambda h: -h["score"])[:k]


def _hit(doc: Document, score: float, namespace: str) -> Hit:
    metadata = {k: v for k, v in doc.metadata.items() if k not in HIT_FIELDS}
    metadata["namespace"] = namespace
    record_id = str(doc.id)
    return Hit(
        id=record_id,
        text=doc.page_content,
        score=float(score),
        doc_id=str(doc.metadata.get("doc_id") or record_id),
        parent_id=doc.metadata.get("parent_id"),
        source=str(doc.metadata.get("source", "")),
        metadata=metadata,
    )


def _served_by(hits: list[Hit], label: str, reason: str | None = None) -> list[Hit]:
    extra: dict[str, Any] = {"served_by": label}
    if reason is not None:
        extra["fallback_reason"] = reason
    return [{**hit, "metadata": {**hit["metadata"], **extra}} for hit in hits]


def _reason(error: Exception) -> str:
    return error.reason if isinstance(error, TierUnavailable) else type(error).__name__


def _documents_and_vectors(
    store: PineconeVectorStore,
    chunks: Sequence[Document] | NumpyVectorStore | EmbeddedIndex,
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
        matrix = embed_texts(embedder, [doc.page_content for doc in documents], progress=False)
    else:
        matrix = np.asarray(vectors, dtype=np.float32)
    if matrix.ndim != 2 or matrix.shape[0] != len(documents):
        raise ValueError(
            f"got vectors of shape {matrix.shape} for {len(documents)} documents; "
            "expected one row per document"
        )
    return documents, matrix


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
    metadata = {k: v for k, v in metadata.items() if v is not None}
    for key, value in metadata.items():
        scalar = isinstance(value, str | bool | int | float)
        strings = isinstance(value, list) and all(isinstance(item, str) for item in value)
        if not (scalar or strings):
            raise IngestError(
                f"chunk {record_id!r}: metadata {key!r} is a {type(value).__name__}; Pinecone "
                "stores only strings, numbers, booleans and lists of strings"
            )
    size = len(json.dumps(metadata).encode())
    if size > MAX_METADATA_BYTES:
        raise IngestError(
            f"chunk {record_id!r}: its metadata (text included) is {size} bytes, over "
            f"Pinecone's {MAX_METADATA_BYTES}; use smaller chunks (chunk_tokens)"
        )
    return record_id, metadata


def _upsert_batch(
    store: PineconeVectorStore,
    batch: list[tuple[str, list[float], dict[str, Any]]],
    namespace: str,
    first: int,
    retry: RetryPolicy,
    sleep: Callable[[float], None],
) -> int:
    from pinecone.exceptions import PineconeApiException, PineconeException
    from urllib3.exceptions import HTTPError

    for attempt in range(1, retry.attempts + 1):
        try:
            response = store.index.upsert(vectors=batch, namespace=namespace)
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


__all__ = (
    "FallbackTier",
    "PineconeTier",
    "PineconeTierError",
    "PineconeTimeoutError",
    "UnavailableTier",
    "pinecone_tier_from_env",
    "upsert_chunks",
)
