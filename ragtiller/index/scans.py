"""One scan per query, shared by the tiers that read the same store (the dense and parent-child
tiers scan the same vectors each turn): computed once, even when both ask at the same moment."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping, Sequence
from concurrent.futures import Future
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from ragtiller.core.filters import filter_key

T = TypeVar("T")

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
