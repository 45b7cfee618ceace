"""Run one function over many items, a bounded number at a time, stopping at the first failure."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent import futures
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


def run_bounded(fn: Callable[[T], R], items: Sequence[T], workers: int, name: str) -> list[R]:
    """``[fn(item) for item in items]``, at most ``workers`` at once; after a failure no further
    item starts (ingest must not write past a batch that failed), and the first failure in item
    order is raised once the running calls end.

    Example:
        >>> run_bounded(lambda x: x * 2, [1, 2, 3], workers=2, name="demo")
        [2, 4, 6]
    """
    if workers <= 1 or len(items) <= 1:
        return [fn(item) for item in items]
    failed = threading.Event()

    def call(item: T) -> R:
        if failed.is_set():
            raise futures.CancelledError
        try:
            return fn(item)
        except BaseException:
            failed.set()
            raise

    with futures.ThreadPoolExecutor(min(workers, len(items)), thread_name_prefix=name) as pool:
        calls = [pool.submit(call, item) for item in items]
        futures.wait(calls, return_when=futures.FIRST_EXCEPTION)
        for pending in calls:
            pending.cancel()  # not started yet; those running end on their own
    for done in calls:
        error = None if done.cancelled() else done.exception()
        if error is not None and not isinstance(error, futures.CancelledError):
            raise error
    return [done.result() for done in calls]
