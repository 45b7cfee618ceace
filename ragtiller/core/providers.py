"""Calling providers: their labels, chat calls on their bulkhead, a client-side rate limit
shared by threads, and a bounded parallel map that stops at the first failure."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from concurrent import futures
from typing import Any, TypeVar

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import Runnable

from ragtiller.core.bulkhead import bulkhead_for, within
from ragtiller.errors import ConfigurationError, Overloaded

T = TypeVar("T")
R = TypeVar("R")


def model_label(provider: object) -> str:
    """The provider's ``model_name`` or ``model``, else its class name.

    Example:
        >>> from langchain_core.embeddings import DeterministicFakeEmbedding
        >>> model_label(DeterministicFakeEmbedding(size=3))
        'DeterministicFakeEmbedding'
    """
    for attr in ("model_name", "model"):
        value = getattr(provider, attr, None)
        if isinstance(value, str) and value:
            return value
    return type(provider).__name__


def native_async(model: BaseChatModel) -> bool:
    """Whether the model implements async calls itself; else LangChain's async path would run
    its sync call on the event loop's default executor."""
    return type(model)._agenerate is not BaseChatModel._agenerate


async def ainvoke_chat(
    model: BaseChatModel, runnable: Runnable[Any, Any], value: Any, *, timeout_s: float
) -> Any:
    """``runnable`` (built on ``model``) on ``value``: awaited when the model is natively async,
    else on the model's bulkhead, never the loop's executor, so a hung model holds only its own."""
    if native_async(model):
        return await within(runnable.ainvoke(value), timeout_s)
    pool = bulkhead_for(model, "chat-model")
    return await pool.call(runnable.invoke, value, timeout_s=timeout_s)


class RateLimit:
    """At most ``requests_per_s`` calls a second and ``items_per_minute`` texts a minute: a
    schedule, not a bucket (each call sleeps until its reserved slot), so bursts cannot exceed it."""

    def __init__(
        self,
        requests_per_s: float | None = None,
        items_per_minute: float | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        for name, value in (
            ("requests_per_s", requests_per_s),
            ("items_per_minute", items_per_minute),
        ):
            if value is not None and not value > 0:
                raise ConfigurationError(f"{name} must be > 0, but got {value}")
        self.requests_per_s = requests_per_s
        self.items_per_minute = items_per_minute
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._next_request = self._next_items = self._paused_until = clock()

    def acquire(self, items: int = 1, max_wait_s: float = math.inf) -> float:
        """Wait for one call's slot (:class:`Overloaded` past ``max_wait_s``); the wait in s."""
        with self._lock:
            now = self._clock()
            start = max(now, self._paused_until)
            next_request, next_items = self._next_request, self._next_items
            if self.requests_per_s is not None:
                start = max(start, self._next_request)
                next_request = start + 1.0 / self.requests_per_s
            if self.items_per_minute is not None:
                start = max(start, self._next_items)
                next_items = start + items * 60.0 / self.items_per_minute
            if start - now > max_wait_s:
                raise Overloaded(
                    f"rate limit: the next call may start in {start - now:.2f} s, "
                    f"past the caller's deadline ({max(0.0, max_wait_s):.2f} s)"
                )
            self._next_request, self._next_items = next_request, next_items
        wait = start - now
        if wait > 0:
            self._sleep(wait)
        return max(0.0, wait)

    def pause(self, seconds: float) -> None:
        """Start no call for ``seconds`` from now (a ``Retry-After`` answer)."""
        with self._lock:
            self._paused_until = max(self._paused_until, self._clock() + seconds)


def run_bounded(fn: Callable[[T], R], items: Sequence[T], workers: int, name: str) -> list[R]:
    """``[fn(item) for item in items]``, ``workers`` at a time; no item starts after a failure
    (ingest must not write past a failed batch), the first in item order is raised.

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
