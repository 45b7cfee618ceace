"""Deadlines that travel with a task: :func:`within` sets one, :func:`time_left` reads it, and
a bulkhead worker thread reads its call's with :func:`call_time_left`."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import math
import threading
import time
from collections.abc import Awaitable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from ragtiller.errors import DeadlineExceeded, Overloaded

if TYPE_CHECKING:
    from ragtiller.core.bulkhead import _Job

T = TypeVar("T")


@dataclass
class Scope:
    """One :func:`within` of the running task: its deadline (loop time) and what it saw."""

    until: float
    parent: Scope | None
    overloaded: bool = False  # a call of this scope was cut while it waited for a worker


current_scope: contextvars.ContextVar[Scope | None] = contextvars.ContextVar(
    "ragtiller_deadline", default=None
)

worker = threading.local()  # .job: the call a bulkhead worker thread is running


def time_left() -> float:
    """Seconds to the innermost :func:`within` deadline (inf: none), for waits such as a lock."""
    scope = current_scope.get()
    return math.inf if scope is None else scope.until - asyncio.get_running_loop().time()


async def within(awaitable: Awaitable[T], seconds: float) -> T:
    """Await ``awaitable`` for at most ``seconds``, never past an enclosing deadline: then
    :class:`DeadlineExceeded`, or :class:`Overloaded` if the work waited for a worker."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    outer = current_scope.get()
    until = started + seconds if outer is None else min(started + seconds, outer.until)
    scope = Scope(until, outer)
    token = current_scope.set(scope)
    try:
        async with asyncio.timeout_at(until) as cut:
            return await awaitable
    except TimeoutError as e:
        if not cut.expired():
            raise
        waited = until - started
        if scope.overloaded:
            raise Overloaded(f"no worker came free in time within {waited:.2f}s") from e
        raise DeadlineExceeded(f"no answer within {waited:.2f}s") from e
    finally:
        current_scope.reset(token)


def call_time_left() -> float:
    """Seconds to the deadline of this thread's bulkhead call, so a throttle never outwaits it."""
    job: _Job | None = getattr(worker, "job", None)
    return math.inf if job is None else job.deadline - time.monotonic()


@contextlib.contextmanager
def throttled() -> Iterator[None]:
    """Count the time inside as waiting (a call cut while throttled is :class:`Overloaded`)."""
    job: _Job | None = getattr(worker, "job", None)
    if job is None:
        yield
        return
    job.throttle_began = time.monotonic()
    try:
        yield
    finally:
        job.throttled_s += time.monotonic() - job.throttle_began
        job.throttle_began = None
