"""CPU helpers shared by the tiers: exact top-k, off-loop execution, one scan per query shared."""

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

INLINE_ROWS = 10_000  # searched on the loop itself: well under a ms, the price of a thread hop
# not the loop's default executor, which a hung third-party provider may have filled
CPU = Bulkhead("cpu-search", workers=os.cpu_count() or 2, queue=1024)


def top_k(scores: npt.NDArray[np.floating], k: int) -> npt.NDArray[np.intp]:
    """Positions of the ``k`` largest scores, best first, ties by position; O(n + k log k)."""
    above = _fast_top_k(scores, k)
    return above if above is not None else _partitioned(scores, k)


def top_k_positive(scores: npt.NDArray[np.floating], k: int) -> npt.NDArray[np.intp]:
    """:func:`top_k` over the positive scores, gathered only when the fast path cannot answer."""
    above = _fast_top_k(scores, k)
    if above is not None:
        return above[scores[above] > 0]
    rows = np.flatnonzero(scores > 0)
    if not len(rows):
        return rows
    return rows[top_k(scores[rows], k)]


THRESHOLD_MIN_ROWS = 4096  # from here top_k first keeps scores above a cheap bound of the k-th


def _fast_top_k(scores: npt.NDArray[np.floating], k: int) -> npt.NDArray[np.intp] | None:
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
    """:func:`top_k` among the scores at or above the least of ``k`` block maxima, or None when
    that cannot be proven equal to :func:`_partitioned` (a tie at the ``k``-th place, a NaN)."""
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
    """A CPU-bound tier: ``asearch`` runs on the loop when :meth:`inline`, else on :data:`CPU`."""

    native_async = True

    @property
    @abstractmethod
    def rows(self) -> int: ...

    @abstractmethod
    def search(self, request: SearchRequest) -> list[Hit]: ...

    def inline(self, request: SearchRequest) -> bool:
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
    """The last :data:`KEPT_SCANS` scans of one store, each computed once; a failed one is not kept."""

    def __init__(self, kept: int = KEPT_SCANS) -> None:
        self._kept = kept
        self._lock = threading.Lock()
        self._scans: OrderedDict[Hashable, Future[Any]] = OrderedDict()

    def holds(self, key: Hashable) -> bool:
        with self._lock:
            future = self._scans.get(key)
        return future is not None and future.done() and future.exception() is None

    def get(self, key: Hashable, scan: Callable[[], T]) -> T:
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
