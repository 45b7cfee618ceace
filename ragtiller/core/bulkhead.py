"""Bulkheads: each provider's blocking calls run on its own pool of daemon threads, so a hung
provider fills only its own (Python cannot cancel a thread; docs/reliability.md). A call waits
for a worker at most its deadline and is :class:`Overloaded` when the wait (or its provider's own
throttle) took more than ``_QUEUED_SHARE`` of its time; one still running at its deadline is
abandoned, its thread counted against ``spare``; ``hung_after`` of those in a row open the pool's
breaker (:class:`ProviderHung`) until a probe answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import math
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from queue import Empty, SimpleQueue
from typing import Any, TypeVar

from ragtiller.core.breaker import CircuitBreaker
from ragtiller.core.deadlines import Scope, current_scope, worker
from ragtiller.core.deadlines import call_time_left as call_time_left  # re-exported
from ragtiller.core.deadlines import throttled as throttled
from ragtiller.core.deadlines import time_left as time_left
from ragtiller.core.deadlines import within as within
from ragtiller.errors import DeadlineExceeded as DeadlineExceeded  # re-exported
from ragtiller.errors import Overloaded as Overloaded
from ragtiller.errors import ProviderHung as ProviderHung

T = TypeVar("T")

logger = logging.getLogger("ragtiller.core.bulkhead")

_EARLY_S = 1e-3  # a call cuts itself this early, so that it, not its caller's timer, says why
_QUEUED_SHARE = 0.05  # a call cut after waiting more than this share of its time is Overloaded


@dataclass(slots=True, eq=False)
class _Job:
    """One call handed to a pool, and where it stands (times are monotonic seconds)."""

    run: Callable[[], Any]
    probe: bool  # the breaker's half-open probe
    deadline: float  # when its caller stops waiting; inf for submit()
    future: Future[Any] = field(default_factory=Future)
    submitted: float = field(default_factory=time.monotonic)
    throttled_s: float = 0.0  # time spent in throttled()
    throttle_began: float | None = None
    queued: bool = False  # no worker was free when it was submitted
    started: float | None = None
    abandoned: bool = False  # its caller stopped waiting while it ran
    finished: bool = False
    overloaded: bool = False  # it raised Overloaded (its own throttle gave up)


class Bulkhead:
    """A self-sizing pool for one provider: ``spare`` (default ``workers``) bounds the abandoned
    calls held beyond ``workers``, ``queue`` (default unbounded) the calls waiting for a worker."""

    def __init__(
        self,
        name: str,
        *,
        workers: int = 32,
        spare: int | None = None,
        queue: int | None = None,
        hung_after: int = 3,
        probe_after_s: float = 5.0,
        idle_s: float = 60.0,
    ) -> None:
        spare = workers if spare is None else spare
        if workers < 1 or spare < 0 or (queue is not None and queue < 0) or not idle_s > 0:
            raise ValueError(
                f"workers must be >= 1, spare and queue >= 0 and idle_s > 0, "
                f"got {workers}, {spare}, {queue}, {idle_s}"
            )
        self.name = name
        self.workers = workers
        self.spare = spare
        self.queue = queue
        self.idle_s = idle_s
        self.breaker = CircuitBreaker(
            failure_threshold=hung_after,
            reset_after_s=probe_after_s,
            name=f"provider {name!r}",
            log=logger,
        )
        self._pending: deque[_Job] = deque()
        self._lock = threading.Lock()
        # One token per idle worker woken; not a condition of _lock, which would wake the worker
        # while the submitter still holds the lock (milliseconds per call under load).
        self._wake: SimpleQueue[None] = SimpleQueue()
        self._threads = 0
        self._idle = 0
        self._abandoned = 0
        self._numbers = itertools.count(1)

    @property
    def threads(self) -> int:
        with self._lock:
            return self._threads

    @property
    def busy(self) -> int:
        with self._lock:
            return self._threads - self._idle

    @property
    def abandoned(self) -> int:
        with self._lock:
            return self._abandoned

    def submit(self, fn: Callable[..., T], *args: Any) -> Future[T]:
        """Queue ``fn(*args)`` for a worker; the caller waits as it likes (no deadline kept)."""
        return self._submit(lambda: fn(*args)).future

    async def call(self, fn: Callable[..., T], *args: Any, timeout_s: float) -> T:
        """``fn(*args)`` on a worker for at most ``timeout_s``, never past an enclosing
        :func:`within`: :class:`Overloaded` if cut while waiting, else :class:`DeadlineExceeded`."""
        loop = asyncio.get_running_loop()
        scope = current_scope.get()
        started = loop.time()
        until = started + timeout_s
        bound = scope is not None and scope.until - _EARLY_S <= until
        if scope is not None and bound:
            until = scope.until - _EARLY_S
        if until <= started:
            raise DeadlineExceeded("no time left for the call")
        job = self._submit(lambda: fn(*args), deadline=time.monotonic() + until - loop.time())
        answer: asyncio.Future[T] = loop.create_future()
        result: Future[T] = job.future
        job.future.add_done_callback(lambda done: _settle_soon(loop, done, answer))
        cut = asyncio.timeout_at(until)
        try:
            async with cut:
                value = await answer
        except asyncio.CancelledError:
            outcome = self._give_up(job, cut=loop.time() >= until, time_s=until - started)
            if outcome in ("queued", "waited"):
                _overloaded(scope)
            raise
        except TimeoutError:
            if not cut.expired():  # the provider's own timeout: it answered
                self._answered()
                raise
            outcome = self._give_up(job, cut=True, time_s=until - started)
            if outcome in ("queued", "waited"):
                if bound:
                    _overloaded(scope)
                raise Overloaded(
                    f"provider {self.name!r}: no worker came free in time within "
                    f"{until - started:.2f}s ({self.workers} busy)"
                ) from None
            if outcome == "finished":
                self._answered()
                return result.result()  # it answered as the deadline passed
            raise DeadlineExceeded(f"no answer within {until - started:.2f}s") from None
        except Overloaded:  # its own throttle gave up before the deadline: no verdict
            with self._lock:
                self._refused(job)
            raise
        except BaseException:  # the provider's own error: it answered
            self._answered()
            raise
        self._answered()
        return value

    def _answered(self) -> None:
        with self._lock:
            self.breaker.succeeded()

    def _submit(self, run: Callable[[], Any], deadline: float = math.inf) -> _Job:
        spawn = wake = False
        with self._lock:
            if not self.breaker.admit():
                snap = self.breaker.snapshot()
                raise ProviderHung(
                    f"provider {self.name!r}: {snap.consecutive_failures} calls in a row "
                    f"outlived their deadline; refused until a probe answers (next in "
                    f"{snap.retry_in_s:.1f}s)"
                )
            job = _Job(run, probe=self.breaker.snapshot().state != "closed", deadline=deadline)
            live = self._threads - self._abandoned
            if self._idle > 0:
                self._idle -= 1  # that worker is now spoken for
                wake = True
            elif live < self.workers and self._threads < self.workers + self.spare:
                self._threads += 1
                spawn = True
            elif live <= 0:
                self._refused(job)
                raise ProviderHung(
                    f"provider {self.name!r}: hung calls hold all its {self._threads} threads"
                )
            elif self.queue is not None and self._waiting() >= self.queue:
                self._refused(job)
                raise Overloaded(
                    f"provider {self.name!r}: all {live} workers busy and {self.queue} calls "
                    "waiting"
                )
            else:
                job.queued = True
            self._pending.append(job)
        if wake:
            self._wake.put(None)
        elif spawn:
            self._start_thread()
        return job

    def _refused(self, job: _Job) -> None:
        """An admitted call never reached its provider (call with the lock held)."""
        if job.probe:
            self.breaker.abandoned()

    def _waiting(self) -> int:
        while self._pending and self._pending[0].future.cancelled():
            self._pending.popleft()
        return sum(1 for job in self._pending if not job.future.cancelled())

    def _give_up(self, job: _Job, *, cut: bool, time_s: float) -> str:
        """The caller stopped waiting (``cut``: at its deadline): ``queued`` (cancelled before it
        ran), ``waited`` (abandoned after waiting most of its time), ``running`` or ``finished``."""
        spawn = False
        now = time.monotonic()
        with self._lock:
            if job.future.cancel():
                self._refused(job)
                return "queued"
            if job.finished:
                if job.overloaded:  # its throttle gave up as its deadline passed: no verdict
                    self._refused(job)
                    return "waited"
                return "finished"
            job.abandoned = True
            self._abandoned += 1
            started = job.started if job.started is not None else now
            began = job.throttle_began  # read first: its thread sets it to None after the sum
            throttled = job.throttled_s + (now - began if began is not None else 0.0)
            queued = started - job.submitted if job.queued else 0.0
            waited = cut and queued + throttled > _QUEUED_SHARE * time_s
            if cut and not waited:
                self.breaker.failed()
            else:
                self.breaker.abandoned()  # no verdict on the provider
            live = self._threads - self._abandoned
            # No replacement once the breaker has opened: the calls queued in the same burst
            # would hang on it too and take the spare threads its probe needs.
            if (
                self.breaker.snapshot().state == "closed"
                and self._idle == 0
                and self._waiting() > 0
                and live < self.workers
                and self._threads < self.workers + self.spare
            ):
                self._threads += 1  # a replacement for the abandoned worker
                spawn = True
        if spawn:
            self._start_thread()
        return "waited" if waited else "running"

    def _start_thread(self) -> None:
        name = f"ragtiller-{self.name}-{next(self._numbers)}"
        threading.Thread(target=self._work, name=name, daemon=True).start()

    def _next(self, finished: _Job | None) -> _Job | None:
        """Settle ``finished``'s accounting; the next queued call, or None counted idle."""
        with self._lock:
            if finished is not None:
                finished.finished = True
                if finished.abandoned:
                    self._abandoned -= 1
            while self._pending:
                job = self._pending.popleft()
                if not job.future.cancelled():
                    return job
            self._idle += 1
            return None

    def _sleep(self) -> bool:
        """Wait until woken; False when idle for ``idle_s`` and so this worker ends."""
        try:
            self._wake.get(timeout=self.idle_s)
            return True
        except Empty:
            with self._lock:
                if self._idle > 0:  # no token is owed to this worker: it may go
                    self._idle -= 1
                    self._threads -= 1
                    return False
        self._wake.get()  # every idle worker is spoken for: a token is on its way
        return True

    def _work(self) -> None:
        job = self._next(None)
        while True:
            if job is None:
                if not self._sleep():
                    return
                job = self._next(None)
                continue
            job.started = time.monotonic()
            if not job.future.set_running_or_notify_cancel():
                job = self._next(None)  # cancelled while it waited
                continue
            worker.job = job
            try:
                value, error = job.run(), None
            except BaseException as e:  # handed to the caller, who decides
                value, error = None, e
            worker.job = None
            done = job
            done.overloaded = isinstance(error, Overloaded)
            # Free before the caller hears back, so its next call finds this worker idle.
            job = self._next(done)
            if error is None:
                done.future.set_result(value)
            else:
                done.future.set_exception(error)


def _overloaded(scope: Scope | None) -> None:
    while scope is not None:
        scope.overloaded = True
        scope = scope.parent


def _settle_soon(loop: asyncio.AbstractEventLoop, done: Future[Any], answer: Any) -> None:
    """Hand a worker's outcome to the caller's loop (nobody waits when that loop is closed)."""
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(_settle, done, answer)


def _settle(done: Future[Any], answer: asyncio.Future[Any]) -> None:
    if answer.done():
        return
    if done.cancelled():
        answer.cancel()
    elif (error := done.exception()) is not None:
        answer.set_exception(error)
    else:
        answer.set_result(done.result())


_pools: dict[int, Bulkhead] = {}
_pinned: dict[int, object] = {}  # providers with no weak reference, alive so their ids stay theirs
_pools_lock = threading.Lock()


def bulkhead_for(provider: object, name: str, **settings: Any) -> Bulkhead:
    """The one bulkhead of ``provider`` (by identity: pydantic models are unhashable), shared by
    every graph; ``settings`` apply only when this call makes it."""
    key = id(provider)
    with _pools_lock:
        pool = _pools.get(key)
        if pool is None:
            pool = Bulkhead(name, **settings)
            try:
                weakref.finalize(provider, _forget, key)
            except TypeError:
                _pinned[key] = provider
            _pools[key] = pool
        return pool


def _forget(key: int) -> None:
    with _pools_lock:
        _pools.pop(key, None)
