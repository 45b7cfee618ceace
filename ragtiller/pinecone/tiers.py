"""Pinecone as the dense and lexical tiers: each namespace one query in a daemon thread, under
one deadline, bounded in flight, merged by score (``docs/pinecone.md``). The lexical tier uses
the ``pinecone`` SDK: ``PineconeSparseVectorStore`` takes only Pinecone's hosted sparse model."""

from __future__ import annotations

import asyncio
import functools
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from concurrent import futures
from typing import TYPE_CHECKING, Any, TypeVar

from langchain_core.documents import Document
from langchain_core.vectorstores import VectorStore

from ragtiller.adapters import to_hit
from ragtiller.core.bulkhead import Overloaded
from ragtiller.core.filters import to_where
from ragtiller.core.tiers import Hit, SearchRequest
from ragtiller.errors import ConfigurationError, TierUnavailable
from ragtiller.errors import PineconeTierError as PineconeTierError  # re-exported
from ragtiller.errors import PineconeTimeoutError as PineconeTimeoutError
from ragtiller.pinecone.sparse_bm25 import (
    RESERVED_NAMESPACE_PREFIX,
    BM25SparseEncoder,
    read_stats,
    read_version,
)

if TYPE_CHECKING:
    from langchain_pinecone import PineconeVectorStore

T = TypeVar("T")


class InFlightLimit:
    """At most ``limit`` calls in flight to one index, abandoned ones included (they hold their
    slot until the SDK gives up), so a stuck index cannot pile up threads: then searches fail at
    once; healthy calls holding every slot make a call wait for one within its deadline."""

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

    def start(self, fn: Callable[[], T], namespace: str, deadline: float) -> futures.Future[T]:
        """Run ``fn`` in a daemon thread holding a slot, waiting for one until ``deadline``."""
        with self._freed:
            while not self._admit(namespace):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise self._overloaded(namespace)
                self._freed.wait(left)
        return self._start(fn)

    async def astart(
        self, fn: Callable[[], T], namespace: str, deadline: float
    ) -> futures.Future[T]:
        while True:
            with self._freed:
                if self._admit(namespace):
                    return self._start(fn)
            if time.monotonic() >= deadline:
                raise self._overloaded(namespace)
            await asyncio.sleep(min(0.01, max(0.0, deadline - time.monotonic())))

    def _admit(self, namespace: str) -> bool:
        if self._in_flight < self.limit:
            self._in_flight += 1
            return True
        if len(self._abandoned) >= self.limit:
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

    def _start(self, fn: Callable[[], T]) -> futures.Future[T]:
        future: futures.Future[T] = futures.Future()

        def run() -> None:
            try:
                if future.set_running_or_notify_cancel():
                    try:
                        future.set_result(fn())
                    except BaseException as e:  # handed to whoever waits on the future
                        future.set_exception(e)
            finally:
                with self._freed:
                    self._in_flight -= 1
                    self._abandoned.discard(id(future))
                    self._freed.notify()

        threading.Thread(target=run, name="ragtiller-pinecone", daemon=True).start()
        return future

    def wait(
        self, future: futures.Future[T], deadline: float, timeout_s: float, namespace: str
    ) -> T:
        futures.wait([future], timeout=max(0.0, deadline - time.monotonic()))
        if not future.done():
            raise self._abandon(future, timeout_s, namespace)
        return call_result(future.result, namespace)

    async def await_(
        self, future: futures.Future[T], deadline: float, timeout_s: float, namespace: str
    ) -> T:
        waiter = asyncio.wrap_future(future)
        done, _ = await asyncio.wait([waiter], timeout=max(0.0, deadline - time.monotonic()))
        if not done:
            waiter.cancel()
            raise self._abandon(future, timeout_s, namespace)
        return call_result(waiter.result, namespace)  # read from the waiter: asyncio sees it read

    def _abandon(
        self, future: futures.Future[T], timeout_s: float, namespace: str
    ) -> PineconeTimeoutError:
        with self._freed:
            if not future.done():
                self._abandoned.add(id(future))
        return PineconeTimeoutError(
            f"Pinecone did not answer within {timeout_s:g} s (namespace {namespace!r}); the SDK "
            "retries HTTP 5xx internally, so a failing service can look like a slow one",
            status_code=None,
            namespace=namespace,
        )


def require_langchain_pinecone() -> None:
    """Fail early, with the install hint, when the ``pinecone`` extra is missing."""
    try:
        import langchain_pinecone  # noqa: F401
    except ImportError as e:
        raise ImportError(
            "the Pinecone tiers need langchain-pinecone: pip install 'ragtiller[pinecone]'"
        ) from e


def call_result(get: Callable[[], T], namespace: str) -> T:
    """``get()``, with transport and API failures as :class:`PineconeTierError`."""
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


TEXT_KEY = "text"  # the metadata key of a chunk's text (langchain-pinecone's default)

QueryOne = Callable[[str], list[tuple[Document, float]]]  # one namespace's (document, score)s


class NamespacedSearch(ABC):
    """Each namespace one call in a daemon thread, all under one deadline, at most ``max_in_flight``
    at once (docs/pinecone.md); ``namespaces=None`` is every non-empty one. Given a function that
    makes the index (or store), building a tier does no I/O."""

    needs_vector: bool

    def __init__(
        self, name: str, timeout_s: float, max_in_flight: int, handle: Any, *, made: bool
    ) -> None:
        if timeout_s <= 0:
            raise ConfigurationError(f"timeout_s must be > 0, but got {timeout_s}")
        self.name = name
        self.timeout_s = timeout_s
        self.call_limit = InFlightLimit(max_in_flight)
        self._handle = handle if made else None
        self._make: Callable[[], Any] | None = None if made else handle
        self._lock = threading.Lock()

    def _connected(self) -> Any:
        with self._lock:
            if self._handle is None:
                assert self._make is not None
                self._handle = self._make()
            return self._handle

    def search(self, request: SearchRequest) -> list[Hit]:
        """At most ``k`` hits, best first, each id once; ``PineconeTierError`` on a failure."""
        query, deadline, limit, namespaces = self._plan(request)
        if namespaces is None:
            listing = limit.start(self._list_namespaces, "*", deadline)
            namespaces = limit.wait(listing, deadline, self.timeout_s, "*")
        unique = dict.fromkeys(namespaces)
        calls = [(ns, limit.start(functools.partial(query, ns), ns, deadline)) for ns in unique]
        results = [(ns, limit.wait(call, deadline, self.timeout_s, ns)) for ns, call in calls]
        return merge_hits(results, request.k)

    async def asearch(self, request: SearchRequest) -> list[Hit]:
        """:meth:`search` for the event loop: the same calls and deadline, awaited."""
        query, deadline, limit, namespaces = self._plan(request)
        if namespaces is None:
            listing = await limit.astart(self._list_namespaces, "*", deadline)
            namespaces = await limit.await_(listing, deadline, self.timeout_s, "*")
        unique = dict.fromkeys(namespaces)
        calls = [
            (ns, await limit.astart(functools.partial(query, ns), ns, deadline)) for ns in unique
        ]
        results = [(ns, await limit.await_(c, deadline, self.timeout_s, ns)) for ns, c in calls]
        return merge_hits(results, request.k)

    def _plan(self, request: SearchRequest) -> tuple[QueryOne, float, InFlightLimit, Any]:
        if request.k < 1:
            raise ValueError(f"k must be > 0, but got {request.k}")
        query, deadline = self._query(request), time.monotonic() + self.timeout_s
        return query, deadline, self.call_limit, request.namespaces

    def _index(self) -> Any:
        return self._connected()

    def _list_namespaces(self) -> list[str]:
        stats = self._index().describe_index_stats()
        return [
            name
            for name, s in stats.namespaces.items()
            if s.vector_count and not name.startswith(RESERVED_NAMESPACE_PREFIX)
        ]

    @abstractmethod
    def _query(self, request: SearchRequest) -> QueryOne:
        """How to query one namespace for ``request`` (checked here, run in a worker)."""


def merge_hits(results: list[tuple[str, list[tuple[Document, float]]]], k: int) -> list[Hit]:
    """Every namespace's hits, best first, each id once (at its best), at most ``k``."""
    best: dict[str, Hit] = {}
    for namespace, pairs in results:
        for doc, score in pairs:
            hit = to_hit(doc, float(score))
            hit["metadata"]["namespace"] = namespace
            if hit["id"] not in best or hit["score"] > best[hit["id"]]["score"]:
                best[hit["id"]] = hit
    return sorted(best.values(), key=lambda h: -h["score"])[:k]


class PineconeTier(NamespacedSearch):
    """The dense tier served by a Pinecone index (cosine, one scale for every namespace) through
    a ``PineconeVectorStore``; ``filter`` is the portable filter, sent as ``$eq`` / ``$in``."""

    needs_vector = True

    def __init__(
        self,
        store: PineconeVectorStore | Callable[[], PineconeVectorStore],
        *,
        name: str = "dense",
        timeout_s: float = 5.0,
        max_in_flight: int = 16,
    ) -> None:
        made = isinstance(store, VectorStore)
        super().__init__(name, timeout_s, max_in_flight, store, made=made)

    def vector_store(self) -> PineconeVectorStore:
        """The store, made on first use (a method: reading attributes never connects)."""
        store: PineconeVectorStore = self._connected()
        return store

    def _index(self) -> Any:
        return self.vector_store().index

    def _query(self, request: SearchRequest) -> QueryOne:
        if request.vector is None:
            raise ValueError("the Pinecone tier needs a query vector, but got None")
        k, filter = request.k, request.filter
        vector = [float(x) for x in request.vector]  # the SDK refuses numpy scalars

        def query(namespace: str) -> list[tuple[Document, float]]:
            return self.vector_store().similarity_search_by_vector_with_score(
                vector, k=k, namespace=namespace, filter=to_where(filter)
            )

        return query


class PineconeLexicalTier(NamespacedSearch):
    """The lexical tier served by a Pinecone sparse index (``dotproduct``) of BM25 vectors: a
    query is encoded with the statistics ``upsert_lexical`` stored, so the dot product is the
    BM25 score bm25s gives. The statistics' version is checked again once ``stats_ttl_s`` has
    passed: a re-ingest reaches every replica within that time."""

    needs_vector = False

    def __init__(
        self,
        index: Any,
        *,
        name: str = "lexical",
        timeout_s: float = 5.0,
        max_in_flight: int = 16,
        stats_ttl_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(name, timeout_s, max_in_flight, index, made=hasattr(index, "query"))
        if stats_ttl_s <= 0:
            raise ConfigurationError(f"stats_ttl_s must be > 0, but got {stats_ttl_s}")
        self.stats_ttl_s = stats_ttl_s
        self._clock = clock
        self._encoder: tuple[str, BM25SparseEncoder] | None = None
        self._checked_at = 0.0

    @property
    def index(self) -> Any:
        """The ``pinecone`` index handle, made on first use when given a function."""
        return self._connected()

    def encoder(self) -> BM25SparseEncoder:
        """The query encoder for the index's current statistics, fetched or re-checked."""
        index = self.index
        with self._lock:
            now = self._clock()
            if self._encoder is not None and now - self._checked_at < self.stats_ttl_s:
                return self._encoder[1]
            if self._encoder is None or read_version(index) != self._encoder[0]:
                found = read_stats(index)
                if found is None:
                    raise TierUnavailable(
                        "no-statistics",
                        f"Pinecone tier {self.name!r}: the sparse index holds no BM25 statistics; "
                        "run upsert_lexical first",
                    )
                self._encoder = (found[0], BM25SparseEncoder(found[1]))
            self._checked_at = now
            return self._encoder[1]

    def _query(self, request: SearchRequest) -> QueryOne:
        text, k, filter = request.query, request.k, request.filter

        def query(namespace: str) -> list[tuple[Document, float]]:
            sparse = self.encoder().encode_query(text)  # in the worker: under the deadline
            if not sparse["indices"]:
                return []
            response = self.index.query(
                sparse_vector=sparse,
                top_k=k,
                namespace=namespace,
                include_metadata=True,
                filter=to_where(filter),
            )
            pairs = []
            for match in response.matches:
                metadata = dict(match.metadata or {})
                text_ = metadata.pop(TEXT_KEY, None)
                score = float(match.score or 0.0)
                if text_ is not None and score > 0:
                    doc = Document(id=match.id, page_content=str(text_), metadata=metadata)
                    pairs.append((doc, score))
            return pairs

        return query
