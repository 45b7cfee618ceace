"""Bulkheads: each provider's blocking calls run on its own small pool of daemon threads.

Python cannot cancel a thread. A provider that hangs keeps its worker forever, so the design
contains the damage instead of undoing it:

- every provider slot of a graph (the embedder, each tier, the chat model) owns one
  :class:`Bulkhead`; a hung provider can fill only its own workers, never the event loop, the
  loop's default executor, another provider or another graph;
- a caller waits at most its deadline (:meth:`Bulkhead.call`); a call still queued at its
  deadline is cancelled before it ever starts;
- when every worker is busy and the queue is full, a call fails at once
  (:class:`BulkheadFull`) instead of queueing behind hung calls: a provider that hangs costs
  about nothing after its pool is saturated;
- workers are daemon threads, so an abandoned call never keeps the process from exiting
  (``concurrent.futures`` joins its workers at exit and would hang there).
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections import deque
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from queue import SimpleQueue
from typing import Any, TypeVar

from ragtiller.errors import RagtillerError

T = TypeVar("T")


class DeadlineExceeded(RagtillerError, TimeoutError):
    """A caller's own deadline passed; a provider's own ``TimeoutError`` is never this one."""


async def within(awaitable: Awaitable[T], seconds: float) -> T:
    """Await ``awaitable`` for at most ``seconds``, cancelling it at the deadline.

    Raises:
        DeadlineExceeded: The deadline passed (the awaitable's own ``TimeoutError``, say a
            provider's HTTP timeout, propagates as it is).
    """
    try:
        async with asyncio.timeout(seconds) as scope:
            return await awaitable
    except TimeoutError as e:
        if scope.expired():
            raise DeadlineExceeded(f"no answer within {seconds:.2f}s") from e
        raise


class BulkheadFull(RagtillerError, RuntimeError):
    """Every worker of a provider's pool is busy and its queue is full (it is likely hung)."""


class Bulkhead:
    """A bounded pool of daemon threads for one provider's blocking calls.

    Args:
        name: Names the threads (``ragtiller-<name>-N``) and the errors.
        workers: Most calls running at once.
        queue: Most calls waiting for a worker; beyond it :meth:`submit` raises.

    Example:
        >>> import asyncio
        >>> pool = Bulkhead("demo", workers=1)
        >>> asyncio.run(pool.call(sum, [1, 2], timeout_s=1.0))
        3
    """

    def __init__(self, name: str, *, workers: int = 4, queue: int = 16) -> None:
        if workers < 1 or queue < 0:
            raise ValueError(f"workers must be >= 1 and queue >= 0, got {workers}, {queue}")
        self.name = name
        self.workers = workers
        self.queue = queue
        self._pending: deque[tuple[Future[Any], Callable[[], Any]]] = deque()
        self._lock = threading.Lock()
        self._wake: SimpleQueue[None] = SimpleQueue()
        """One token per idle worker woken. Workers block here, not on a condition of
        ``_lock``: a condition wakes the worker while the submitter still holds the lock, and
        under load the worker's second wait for the lock cost milliseconds per call."""
        self._threads = 0
        self._idle = 0

    @property
    def busy(self) -> int:
        """Workers running a call now (hung ones included)."""
        with self._lock:
            return self._threads - self._idle

    def submit(self, fn: Callable[..., T], *args: Any) -> Future[T]:
        """Queue ``fn(*args)`` for a worker.

        Raises:
            BulkheadFull: All workers are busy and ``queue`` calls already wait.
        """
        future: Future[T] = Future()
        with self._lock:
            while self._pending and self._pending[0][0].cancelled():
                self._pending.popleft()
            waiting = sum(1 for f, _ in self._pending if not f.cancelled())
            if self._idle == 0 and self._threads >= self.workers and waiting >= self.queue:
                raise BulkheadFull(
                    f"provider {self.name!r}: all {self.workers} workers busy and "
                    f"{waiting} calls waiting"
                )
            self._pending.append((future, lambda: fn(*args)))
            wake = self._idle > 0
            spawn = not wake and self._threads < self.workers
            if wake:
                self._idle -= 1  # that worker is now spoken for
            elif spawn:
                self._threads += 1
            name = f"ragtiller-{self.name}-{self._threads}"
        if wake:
            self._wake.put(None)
        elif spawn:
            threading.Thread(target=self._work, name=name, daemon=True).start()
        return future

    async def call(self, fn: Callable[..., T], *args: Any, timeout_s: float) -> T:
        """Run ``fn(*args)`` on a worker; wait at most ``timeout_s`` seconds.

        Raises:
            DeadlineExceeded: No result within ``timeout_s`` (the call is abandoned, not
                stopped).
            BulkheadFull: See :meth:`submit`.
        """
        future = self.submit(fn, *args)
        try:
            return await within(asyncio.wrap_future(future), timeout_s)
        finally:
            future.cancel()  # a no-op once it ran; frees its queue slot if it never started

    def _take(self) -> tuple[Future[Any], Callable[[], Any]] | None:
        """The next queued call, or None after counting this worker idle."""
        with self._lock:
            if self._pending:
                return self._pending.popleft()
            self._idle += 1
            return None

    def _work(self) -> None:
        job = self._take()
        while True:
            if job is None:
                self._wake.get()
                job = self._take()
                continue
            future, run = job
            if not future.set_running_or_notify_cancel():
                job = self._take()  # cancelled while it waited
                continue
            try:
                value, error = run(), None
            except BaseException as e:  # handed to the caller, who decides
                value, error = None, e
            # Free before the caller hears back, so its next call finds this worker idle.
            job = self._take()
            if error is None:
                future.set_result(value)
            else:
                future.set_exception(error)


_pools: dict[int, Bulkhead] = {}
_pools_lock = threading.Lock()


def bulkhead_for(provider: object, name: str) -> Bulkhead:
    """The one bulkhead of ``provider`` (an instance), shared by every graph that uses it.

    Keyed by identity, since providers are often unhashable pydantic models; the entry goes
    when the provider is garbage-collected. A provider that cannot be weakly referenced gets a
    fresh bulkhead per call site instead.
    """
    key = id(provider)
    with _pools_lock:
        pool = _pools.get(key)
        if pool is None:
            pool = Bulkhead(name)
            try:
                weakref.finalize(provider, _forget, key)
            except TypeError:
                return pool
            _pools[key] = pool
        return pool


def _forget(key: int) -> None:
    with _pools_lock:
        _pools.pop(key, None)
