"""CPU helpers shared by the tiers: exact top-k selection, off-loop execution, and one scan per
query shared by the tiers that read the same store (the dense and parent-child tiers scan the
same vectors each turn): computed once, even when both ask at the same moment."""

from __future__ import annotations

import asyncio
import functools
import os
import threading
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping, Sequence
from concurrent.futures import Future
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from ragtiller.core.bulkhead import Bulkhead
from ragtiller.core.filters import filter_key
from ragtiller.core.tiers import Hit, SearchRequest

T = TypeVar("T")

INLINE_ROWS = 10_000
"""Tiers with at most this many rows search on the event loop itself: an exact search takes
well under a millisecond there, about the price of a hop to a worker thread and back."""
CPU = Bulkhead("cpu-search", workers=os.cpu_count() or 2, queue=1024)
"""Workers of the large in-process searches; never the loop's default executor, which a hung
third-party provider may have filled (see :mod:`ragtiller.core.bulkhead`)."""


def top_k(scores: npt.NDArray[np.floating], k: int) -> npt.NDArray[np.intp]:
    """Positions of the ``k`` (> 0) largest scores, best first; ties keep the lower position
    first. O(n + k log k), not O(n log n)."""
    above = _fast_top_k(scores, k)
    return above if above is not None else _partitioned(scores, k)


def top_k_positive(scores: npt.NDArray[np.floating], k: int) -> npt.NDArray[np.intp]:
    """:func:`top_k` over the positive scores alone, without gathering them first when the top
    ``k`` of all scores is one set: then it holds every one of the top ``k`` positives."""
    above = _fast_top_k(scores, k)
    if above is not None:
        return above[scores[above] > 0]
    rows = np.flatnonzero(scores > 0)
    if not len(rows):
        return rows
    return rows[top_k(scores[rows], k)]


THRESHOLD_MIN_ROWS = 4096
"""From this many scores :func:`top_k` first keeps those at or above a cheap lower bound of the
k-th best (a few hundred of 100,000)."""


def _fast_top_k(scores: npt.NDArray[np.floating], k: int) -> npt.NDArray[np.intp] | None:
    """:func:`_above_threshold` where it pays (enough scores for the bound to prune), else None."""
    if k < 1:
        raise ValueError(f"k must be > 0, but got {k}")
    n = scores.shape[0]
    if n >= THRESHOLD_MIN_ROWS and n >= 32 * k:
        return _above_threshold(scores, k)
    return None


def _partitioned(scores: npt.NDArray[np.floating], k: int) -> npt.NDArray[np.intp]:
    """:func:`top_k` by one partition of every score (the reference the fast path must equal)."""
    n = scores.shape[0]
    candidates = np.arange(n) if k >= n else np.argpartition(-scores, k - 1)[:k]
    order = np.lexsort((candidates, -scores[candidates]))
    return candidates[order]


def _above_threshold(scores: npt.NDArray[np.floating], k: int) -> npt.NDArray[np.intp] | None:
    """:func:`top_k` among the scores at or above the least of ``k`` block maxima (at least
    ``k`` scores reach it, so none below is in the top ``k``), or None when that cannot be
    proven to equal :func:`_partitioned`: a tie at the ``k``-th place, or a NaN."""
    n = scores.shape[0]
    bound = scores[: n // k * k].reshape(k, -1).max(axis=1).min()
    if not np.isfinite(bound):
        return None
    kept = np.flatnonzero(scores >= bound)
    if len(kept) > n // 4:  # no gain: most scores are tied near the top
        return None
    values = scores[kept]
    if len(kept) > k:
        part = np.argpartition(-values, k)
        if values[part[:k]].min() <= values[part[k]]:
            return None  # a tie at the k-th place: the partition's pick decides
        kept, values = kept[part[:k]], values[part[:k]]
    order = np.lexsort((kept, -values))
    return kept[order]


class CpuTier(ABC):
    """A tier whose search is CPU-bound numpy/BM25 work: ``asearch`` runs it on the event loop
    when :meth:`inline` says it is cheap, else in a worker thread of the ``cpu-search`` bulkhead
    (``native_async``: the graph awaits it rather than use a thread)."""

    native_async = True

    @property
    @abstractmethod
    def rows(self) -> int:
        """Rows one search scans."""

    @abstractmethod
    def search(self, request: SearchRequest) -> list[Hit]:
        """At most ``request.k`` hits, best first."""

    def inline(self, request: SearchRequest) -> bool:
        """Whether ``request`` is cheap enough to search on the event loop."""
        return self.rows <= INLINE_ROWS

    async def asearch(self, request: SearchRequest) -> list[Hit]:
        if self.inline(request):
            return self.search(request)
        return await asyncio.wrap_future(CPU.submit(functools.partial(self.search, request)))


KEPT_SCANS = 8  # per store, for several turns in flight; at 100k rows an entry is 0.4 MB


def scan_key(
    query: npt.NDArray[np.float32] | tuple[str, ...],
    namespaces: Sequence[str] | None,
    filter: Mapping[str, Any] | None,
) -> Hashable | None:
    """What identifies a scan's result (of a vector, or of a query's terms); None: unhashable."""
    key = (
        query if isinstance(query, tuple) else query.tobytes(),
        None if namespaces is None else tuple(namespaces),
        None if not filter else filter_key(filter),
    )
    try:
        hash(key)
    except TypeError:
        return None
    return key


class SharedScans:
    """The last :data:`KEPT_SCANS` results of one store's scans, each computed once (thread-safe,
    read-only). A scan that raises is not kept: its waiters get the error, the next caller scans."""

    def __init__(self, kept: int = KEPT_SCANS) -> None:
        self._kept = kept
        self._lock = threading.Lock()
        self._scans: OrderedDict[Hashable, Future[Any]] = OrderedDict()

    def holds(self, key: Hashable) -> bool:
        """Whether the result for ``key`` is kept and ready (a search reading it scans nothing)."""
        with self._lock:
            future = self._scans.get(key)
        return future is not None and future.done() and future.exception() is None

    def get(self, key: Hashable, scan: Callable[[], T]) -> T:
        """The result of ``scan()`` for ``key``: kept, being computed by another caller, or now."""
        with self._lock:
            future = self._scans.get(key)
            owner = future is None
            if future is None:
                future = self._scans[key] = Future()
                while len(self._scans) > self._kept:
                    self._scans.popitem(last=False)
            else:
                self._scans.move_to_end(key)
        if not owner:
            shared: T = future.result()
            return shared
        try:
            value = scan()
        except BaseException as e:
            with self._lock:
                if self._scans.get(key) is future:
                    del self._scans[key]
            future.set_exception(e)
            raise
        future.set_result(value)
        return value
