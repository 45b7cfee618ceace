"""Pinecone as the dense tier, through ``langchain_pinecone.PineconeVectorStore``.

One Pinecone namespace per policy route: a route's ``namespace`` (or list of them) is what the
graph passes to :meth:`PineconeTier.search`. See ``docs/pinecone.md``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from langchain_core.documents import Document
from langchain_core.vectorstores import VectorStore

from ragtiller.core.filters import to_where
from ragtiller.core.tiers import SearchRequest
from ragtiller.pinecone.calls import NamespacedSearch, QueryOne, searchable

if TYPE_CHECKING:
    from langchain_pinecone import PineconeVectorStore


class PineconeTier(NamespacedSearch):
    """The dense tier served by a Pinecone index (cosine metric) instead of the numpy matrix.

    Each namespace asked for is one query (``similarity_search_by_vector_with_score`` with
    ``namespace`` and ``filter``), all run in parallel. With several namespaces the results
    are merged by score (cosine scores from one index share one scale), an id found in two
    namespaces is kept once with its best score, and the best ``k`` are returned; the
    namespace that served a hit is in ``metadata["namespace"]``. ``namespaces=None`` searches
    every namespace the index holds (listed by ``describe_index_stats``, one more request),
    as the embedded dense tier does.

    Hits: ``id`` is the vector id (the chunk id, see ``upsert_chunks``), ``text`` the
    ``text`` metadata, ``score`` Pinecone's cosine, ``doc_id`` / ``parent_id`` / ``source``
    their metadata (``doc_id`` defaults to the id, ``parent_id`` to None), ``metadata`` the
    rest. Matches without ``text`` metadata are skipped by langchain-pinecone. ``filter`` is
    the portable filter (:mod:`ragtiller.core.filters`: equality, membership for a list, which
    behave the same on the embedded tier), sent as ``$eq``/``$in``; an entry already in
    Pinecone's filter language is sent as it is.

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
        max_in_flight: Calls to the index in flight at once, abandoned ones included; more fail
            at once with :class:`PineconeTierError`, so a stuck index cannot pile up threads.

    Raises:
        ConfigurationError: ``timeout_s`` is not positive or ``max_in_flight`` < 1.

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
        max_in_flight: int = 16,
    ) -> None:
        super().__init__(name, timeout_s, max_in_flight)
        self._store: PineconeVectorStore | None = None
        self._make_store: Callable[[], PineconeVectorStore] | None = None
        if isinstance(store, VectorStore):
            self._store = store
        else:
            self._make_store = store
        self._lock = threading.Lock()

    def vector_store(self) -> PineconeVectorStore:
        """The vector store, made on first use when the tier was given a function (a method, not
        an attribute, so that reading the tier's attributes never connects).

        Raises:
            TierUnavailable: The function says the tier cannot run (``no-credentials``).
        """
        with self._lock:
            if self._store is None:
                assert self._make_store is not None
                self._store = self._make_store()
            return self._store

    def _query(self, request: SearchRequest) -> QueryOne:
        """Scored by Pinecone's cosine similarity; the tier reads the vector, not the text.

        Raises:
            ValueError: ``request.vector`` is None or ``request.k`` < 1.
        """
        vector, k = _query_vector(request.vector, request.k), request.k
        filter = request.filter

        def query(namespace: str) -> list[tuple[Document, float]]:
            return self.vector_store().similarity_search_by_vector_with_score(
                vector, k=k, namespace=namespace, filter=to_where(filter)
            )

        return query

    def _list_namespaces(self) -> list[str]:
        stats = self.vector_store().index.describe_index_stats()
        return searchable({name: s.vector_count for name, s in stats.namespaces.items()})


def _query_vector(vector: Sequence[float] | None, k: int) -> list[float]:
    """The query vector as plain floats (the SDK refuses numpy scalars), once both are checked."""
    if vector is None:
        raise ValueError("the Pinecone tier needs a query vector, but got None")
    if k < 1:
        raise ValueError(f"k must be > 0, but got {k}")
    return [float(x) for x in vector]


__all__ = ("PineconeTier",)
