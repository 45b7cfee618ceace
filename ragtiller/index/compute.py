"""CPU helpers shared by the tiers: exact top-k selection and off-loop execution."""

from __future__ import annotations

import asyncio
import functools
import os
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from ragtiller.core.bulkhead import Bulkhead
from ragtiller.core.tiers import Hit, SearchRequest

T = TypeVar("T")

INLINE_ROWS = 10_000
"""Tiers with at most this many rows search on the event loop itself.

Below it an exact search (a 10k x 384 float32 mat-vec plus a partial sort, or a BM25 pass)
takes well under a millisecond, which is about the price of a hop to a worker thread and back;
above it the work goes to a worker thread, where numpy releases the GIL.
"""
_CPU = Bulkhead("cpu-search", workers=os.cpu_count() or 2, queue=1024)
"""Workers of the large in-process searches; never the loop's default executor, which a hung
third-party provider may have filled (see :mod:`ragtiller.core.bulkhead`)."""


def top_k(scores: npt.NDArray[np.floating], k: int) -> npt.NDArray[np.intp]:
    """Positions of the ``k`` largest scores, best first; ties keep the lower position first.

    Uses :func:`numpy.argpartition`, so the cost is O(n + k log k), not O(n log n).

    Args:
        scores: One score per row.
        k: How many positions to return; must be > 0.

    Returns:
        At most ``k`` positions into ``scores``.

    Raises:
        ValueError: ``k`` is not positive.
    """
    if k < 1:
        raise ValueError(f"k must be > 0, but got {k}")
    n = scores.shape[0]
    candidates = np.arange(n) if k >= n else np.argpartition(-scores, k - 1)[:k]
    order = np.lexsort((candidates, -scores[candidates]))
    return candidates[order]


async def run_cpu(fn: Callable[[], T], *, rows: int) -> T:
    """Run a CPU-bound search inline when it is small, in a worker thread when it is not.

    Args:
        fn: The search to run.
        rows: How many rows the search scans; compared with :data:`INLINE_ROWS`.

    Returns:
        Whatever ``fn`` returns.
    """
    if rows <= INLINE_ROWS:
        return fn()
    return await asyncio.wrap_future(_CPU.submit(fn))


class CpuTier(ABC):
    """A tier whose search is CPU-bound numpy/BM25 work: ``asearch`` follows :func:`run_cpu`."""

    native_async = True
    """Its ``asearch`` never blocks the loop, so the graph awaits it rather than use a thread."""

    @property
    @abstractmethod
    def rows(self) -> int:
        """Rows one search scans."""

    @abstractmethod
    def search(self, request: SearchRequest) -> list[Hit]:
        """At most ``request.k`` hits, best first."""

    async def asearch(self, request: SearchRequest) -> list[Hit]:
        """Async twin of :meth:`search`; never blocks the loop on a large tier."""
        return await run_cpu(functools.partial(self.search, request), rows=self.rows)
