"""Pinecone calls under one deadline, their failures as one error type, their results as hits.

Shared by the dense (:mod:`ragtiller.index.pinecone`) and lexical
(:mod:`ragtiller.index.pinecone_lexical`) tiers, so both fail, time out and merge namespaces
the same way. See ``docs/pinecone.md``.
"""

from __future__ import annotations

import asyncio
import functools
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from concurrent import futures
from typing import TypeVar

from langchain_core.documents import Document

from ragtiller.errors import ConfigurationError, RagtillerError
from ragtiller.index._records import HIT_FIELDS
from ragtiller.types import Hit, SearchRequest

T = TypeVar("T")

INSTALL_HINT = "the Pinecone tiers need langchain-pinecone: pip install 'ragtiller[pinecone]'"
RESERVED_NAMESPACE_PREFIX = "__ragtiller"
"""Namespaces ragtiller keeps for itself (the BM25 statistics); never searched as a route's."""

QueryOne = Callable[[str], list[tuple[Document, float]]]
"""One namespace's query: the namespace in, (document, score) pairs out, best first."""


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


class InFlightLimit:
    """At most ``limit`` calls in flight to one Pinecone index; a call beyond that fails at once.

    A call abandoned at its deadline still holds its place until the SDK gives up, so a stuck
    index cannot pile up threads: once it holds ``limit`` calls, searches fail fast (and fall
    back, when the policy says so) instead of starting more. The graph's per-tier bulkhead
    (``ragtiller/bulkhead.py``) bounds the searches running; this bounds the Pinecone calls
    those searches fan out to (one per namespace), which outlive a search that timed out.

    Args:
        limit: Calls in flight allowed, at least 1.

    Raises:
        ConfigurationError: ``limit`` < 1.

    Example:
        >>> InFlightLimit(4).limit
        4
    """

    def __init__(self, limit: int = 16) -> None:
        if limit < 1:
            raise ConfigurationError(f"max_in_flight must be >= 1, but got {limit}")
        self.limit = limit
        self._in_flight = 0
        self._lock = threading.Lock()

    @property
    def count(self) -> int:
        """Calls started and not yet ended (abandoned ones included)."""
        with self._lock:
            return self._in_flight

    def start(self, fn: Callable[[], T], namespace: str) -> futures.Future[T]:
        """Run ``fn`` in a new daemon thread holding one slot until it ends.

        Raises:
            PineconeTierError: Every slot is taken.
        """
        with self._lock:
            full = self._in_flight >= self.limit
            if not full:
                self._in_flight += 1
        if full:
            raise PineconeTierError(
                f"{self.limit} Pinecone calls already in flight (namespace {namespace!r}): the "
                "index is slow or stuck; refusing more until they end",
                status_code=None,
                namespace=namespace,
            )
        return _start(fn, self._release)

    def _release(self) -> None:
        with self._lock:
            self._in_flight -= 1


def require_langchain_pinecone() -> None:
    """Fail early, with the install hint, when the ``pinecone`` extra is missing.

    Raises:
        ImportError: langchain-pinecone is not installed.
    """
    try:
        import langchain_pinecone  # noqa: F401
    except ImportError as e:
        raise ImportError(INSTALL_HINT) from e


def search_namespaces(
    query_one: QueryOne,
    list_namespaces: Callable[[], list[str]],
    namespaces: Sequence[str] | None,
    k: int,
    timeout_s: float,
    limit: InFlightLimit,
) -> list[Hit]:
    """Query each namespace in parallel under one deadline and merge the hits by score.

    Raises:
        PineconeTierError: A call failed or ``limit`` calls are in flight; :class:`PineconeTimeoutError`
            past the deadline.
    """
    deadline = time.monotonic() + timeout_s
    if namespaces is None:
        namespaces = _wait(limit.start(list_namespaces, "*"), deadline, timeout_s, "*")
    calls = _start_queries(query_one, namespaces, limit)
    return merge_hits([(ns, _wait(call, deadline, timeout_s, ns)) for ns, call in calls], k)


async def asearch_namespaces(
    query_one: QueryOne,
    list_namespaces: Callable[[], list[str]],
    namespaces: Sequence[str] | None,
    k: int,
    timeout_s: float,
    limit: InFlightLimit,
) -> list[Hit]:
    """Async twin of :func:`search_namespaces`: the same threads, awaited off the event loop."""
    deadline = time.monotonic() + timeout_s
    if namespaces is None:
        namespaces = await _await(limit.start(list_namespaces, "*"), deadline, timeout_s, "*")
    calls = _start_queries(query_one, namespaces, limit)
    return merge_hits([(ns, await _await(call, deadline, timeout_s, ns)) for ns, call in calls], k)


def searchable(namespaces: dict[str, int]) -> list[str]:
    """Non-empty namespaces a search over "every namespace" covers (ragtiller's own left out)."""
    return [
        name
        for name, count in namespaces.items()
        if count and not name.startswith(RESERVED_NAMESPACE_PREFIX)
    ]


def merge_hits(results: list[tuple[str, list[tuple[Document, float]]]], k: int) -> list[Hit]:
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


def call_result(get: Callable[[], T], namespace: str) -> T:
    """The result of a call, with transport and API failures as :class:`PineconeTierError`.

    Raises:
        PineconeTierError: Pinecone answered with an error status, or not at all.
    """
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


def _start_queries(
    query_one: QueryOne, namespaces: Sequence[str], limit: InFlightLimit
) -> list[tuple[str, futures.Future[list[tuple[Document, float]]]]]:
    unique = list(dict.fromkeys(namespaces))
    return [(ns, limit.start(functools.partial(query_one, ns), ns)) for ns in unique]


def _start(fn: Callable[[], T], done: Callable[[], None]) -> futures.Future[T]:
    """Run ``fn`` in a new daemon thread (one that can never delay exit), then call ``done``."""
    future: futures.Future[T] = futures.Future()

    def run() -> None:
        try:
            if not future.set_running_or_notify_cancel():
                return
            try:
                future.set_result(fn())
            except BaseException as e:  # handed to whoever waits on the future
                future.set_exception(e)
        finally:
            done()

    threading.Thread(target=run, name="ragtiller-pinecone", daemon=True).start()
    return future


def _wait(future: futures.Future[T], deadline: float, timeout_s: float, namespace: str) -> T:
    futures.wait([future], timeout=max(0.0, deadline - time.monotonic()))
    if not future.done():
        raise _timeout(timeout_s, namespace)
    return call_result(future.result, namespace)


async def _await(future: futures.Future[T], deadline: float, timeout_s: float, namespace: str) -> T:
    waiter = asyncio.wrap_future(future)
    done, _ = await asyncio.wait([waiter], timeout=max(0.0, deadline - time.monotonic()))
    if not done:
        waiter.cancel()
        raise _timeout(timeout_s, namespace)
    return call_result(waiter.result, namespace)  # read from the waiter, so asyncio sees it read


def _timeout(timeout_s: float, namespace: str) -> PineconeTimeoutError:
    return PineconeTimeoutError(
        f"Pinecone did not answer within {timeout_s:g} s (namespace {namespace!r}); the SDK "
        "retries HTTP 5xx internally, so a failing service can look like a slow one",
        status_code=None,
        namespace=namespace,
    )


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


class NamespacedSearch(ABC):
    """What both Pinecone tiers share: each namespace queried in parallel under one deadline,
    with a bound on calls in flight. A tier supplies how to query one namespace and how to list
    the namespaces a search over "every namespace" covers.

    Raises (from ``__init__``):
        ConfigurationError: ``timeout_s`` is not positive or ``max_in_flight`` < 1.
    """

    def __init__(self, name: str, timeout_s: float, max_in_flight: int) -> None:
        if timeout_s <= 0:
            raise ConfigurationError(f"timeout_s must be > 0, but got {timeout_s}")
        self.name = name
        self.timeout_s = timeout_s
        self.call_limit = InFlightLimit(max_in_flight)

    def search(self, request: SearchRequest) -> list[Hit]:
        """At most ``request.k`` hits over the request's namespaces, best first.

        Raises:
            PineconeTierError: Pinecone answered with an error or not at all;
                :class:`PineconeTimeoutError` when the deadline passed.
        """
        return search_namespaces(
            self._query(request),
            self._list_namespaces,
            request.namespaces,
            request.k,
            self.timeout_s,
            self.call_limit,
        )

    async def asearch(self, request: SearchRequest) -> list[Hit]:
        """Async twin of :meth:`search`: the same calls and deadline, awaited off the loop."""
        return await asearch_namespaces(
            self._query(request),
            self._list_namespaces,
            request.namespaces,
            request.k,
            self.timeout_s,
            self.call_limit,
        )

    @abstractmethod
    def _query(self, request: SearchRequest) -> QueryOne:
        """How to query one namespace for ``request`` (checked here, run in a worker)."""

    @abstractmethod
    def _list_namespaces(self) -> list[str]:
        """The namespaces a search over every namespace covers."""
