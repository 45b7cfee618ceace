"""Pinecone calls under one deadline, their failures as one error type, their results as hits.

Shared by the dense (:mod:`ragtiller.pinecone`) and lexical
(:mod:`ragtiller.pinecone.lexical`) tiers, so both fail, time out and merge namespaces
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

from ragtiller.core.bulkhead import Overloaded
from ragtiller.core.tiers import HIT_FIELDS, Hit, SearchRequest
from ragtiller.errors import ConfigurationError
from ragtiller.errors import PineconeTierError as PineconeTierError  # re-exported
from ragtiller.errors import PineconeTimeoutError as PineconeTimeoutError

T = TypeVar("T")

INSTALL_HINT = "the Pinecone tiers need langchain-pinecone: pip install 'ragtiller[pinecone]'"
RESERVED_NAMESPACE_PREFIX = "__ragtiller"
"""Namespaces ragtiller keeps for itself (the BM25 statistics); never searched as a route's."""

QueryOne = Callable[[str], list[tuple[Document, float]]]
"""One namespace's query: the namespace in, (document, score) pairs out, best first."""


class InFlightLimit:
    """At most ``limit`` calls in flight to one Pinecone index: a call beyond that waits for a
    slot within its deadline (admission, not shedding), and only a stuck index is refused.

    A call abandoned at its deadline still holds its place until the SDK gives up, so a stuck
    index cannot pile up threads: once *abandoned* calls hold every slot, searches fail fast
    (and fall back, when the policy says so) instead of starting more. While some slots are
    held by healthy calls, a new call waits for one to end; if none ends before the caller's
    deadline it raises :class:`~ragtiller.core.bulkhead.Overloaded` (reason ``overloaded``: queueing,
    not Pinecone's failure). The graph's per-tier bulkhead (``ragtiller/core/bulkhead.py``) bounds
    the searches running; this bounds the Pinecone calls those searches fan out to (one per
    namespace), which outlive a search that timed out.

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
        self._abandoned: set[int] = set()
        self._freed = threading.Condition()

    @property
    def count(self) -> int:
        """Calls started and not yet ended (abandoned ones included)."""
        with self._freed:
            return self._in_flight

    def start(
        self, fn: Callable[[], T], namespace: str, deadline: float | None = None
    ) -> futures.Future[T]:
        """Run ``fn`` in a new daemon thread holding one slot until it ends, waiting for a
        slot until ``deadline`` (``time.monotonic()``; None: not at all). Blocking: the async
        path uses :meth:`astart`.

        Raises:
            PineconeTierError: Abandoned calls hold every slot (the index is stuck).
            Overloaded: Healthy calls held every slot until ``deadline``.
        """
        with self._freed:
            while not self._admit(namespace, deadline):
                left = 0.0 if deadline is None else deadline - time.monotonic()
                if left <= 0:
                    raise self._overloaded(namespace)
                self._freed.wait(left)
        return _start(fn, self._release)

    async def astart(
        self, fn: Callable[[], T], namespace: str, deadline: float
    ) -> futures.Future[T]:
        """:meth:`start` for the event loop: the wait for a slot never blocks the loop."""
        while True:
            with self._freed:
                if self._admit(namespace, deadline):
                    return _start(fn, self._release)
            if time.monotonic() >= deadline:
                raise self._overloaded(namespace)
            await asyncio.sleep(min(0.01, max(0.0, deadline - time.monotonic())))

    def abandon(self, future: futures.Future[object]) -> None:
        """Count ``future``'s call as abandoned (its caller stopped waiting) until it ends."""
        with self._freed:
            if not future.done():
                self._abandoned.add(id(future))

    def _admit(self, namespace: str, deadline: float | None) -> bool:
        """Take a slot if one is free (the caller holds the lock)."""
        if self._in_flight < self.limit:
            self._in_flight += 1
            return True
        if len(self._abandoned) >= self.limit or deadline is None:
            raise PineconeTierError(
                f"{self.limit} Pinecone calls already in flight (namespace {namespace!r}): the "
                "index is slow or stuck; refusing more until they end",
                status_code=None,
                namespace=namespace,
            )
        return False

    def _overloaded(self, namespace: str) -> Overloaded:
        return Overloaded(
            f"{self.limit} healthy Pinecone calls held every slot until the deadline "
            f"(namespace {namespace!r}): the tier is busy, not failing"
        )

    def _release(self, future: futures.Future[object]) -> None:
        with self._freed:
            self._in_flight -= 1
            self._abandoned.discard(id(future))
            self._freed.notify()


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
        listing = limit.start(list_namespaces, "*", deadline)
        namespaces = _wait(listing, deadline, timeout_s, "*", limit)
    unique = list(dict.fromkeys(namespaces))
    calls = [(ns, limit.start(functools.partial(query_one, ns), ns, deadline)) for ns in unique]
    return merge_hits([(ns, _wait(call, deadline, timeout_s, ns, limit)) for ns, call in calls], k)


async def asearch_namespaces(
    query_one: QueryOne,
    list_namespaces: Callable[[], list[str]],
    namespaces: Sequence[str] | None,
    k: int,
    timeout_s: float,
    limit: InFlightLimit,
) -> list[Hit]:
    """Async twin of :func:`search_namespaces`: the same threads, awaited off the event loop."""
    results = await acall_namespaces(query_one, list_namespaces, namespaces, timeout_s, limit)
    return merge_hits(results, k)


async def acall_namespaces(
    call_one: Callable[[str], T],
    list_namespaces: Callable[[], list[str]],
    namespaces: Sequence[str] | None,
    timeout_s: float,
    limit: InFlightLimit,
) -> list[tuple[str, T]]:
    """``call_one`` for each namespace (None: every one ``list_namespaces`` names), each in
    its own thread under one deadline, awaited off the event loop; in the namespaces' order.

    Raises:
        PineconeTierError: A call failed or ``limit`` calls are in flight; :class:`PineconeTimeoutError`
            past the deadline.
    """
    deadline = time.monotonic() + timeout_s
    if namespaces is None:
        listing = await limit.astart(list_namespaces, "*", deadline)
        namespaces = await _await(listing, deadline, timeout_s, "*", limit)
    calls = []
    for ns in dict.fromkeys(namespaces):
        calls.append((ns, await limit.astart(functools.partial(call_one, ns), ns, deadline)))
    return [(ns, await _await(call, deadline, timeout_s, ns, limit)) for ns, call in calls]


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


def _start(
    fn: Callable[[], T], done: Callable[[futures.Future[object]], None]
) -> futures.Future[T]:
    """Run ``fn`` in a new daemon thread (one that can never delay exit), then call ``done``
    with its future."""
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
            done(future)  # type: ignore[arg-type]

    threading.Thread(target=run, name="ragtiller-pinecone", daemon=True).start()
    return future


def _wait(
    future: futures.Future[T],
    deadline: float,
    timeout_s: float,
    namespace: str,
    limit: InFlightLimit,
) -> T:
    futures.wait([future], timeout=max(0.0, deadline - time.monotonic()))
    if not future.done():
        limit.abandon(future)  # type: ignore[arg-type]
        raise _timeout(timeout_s, namespace)
    return call_result(future.result, namespace)


async def _await(
    future: futures.Future[T],
    deadline: float,
    timeout_s: float,
    namespace: str,
    limit: InFlightLimit,
) -> T:
    waiter = asyncio.wrap_future(future)
    done, _ = await asyncio.wait([waiter], timeout=max(0.0, deadline - time.monotonic()))
    if not done:
        limit.abandon(future)  # type: ignore[arg-type]
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
