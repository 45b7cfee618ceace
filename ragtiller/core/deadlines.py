"""Deadlines that travel with a task: :func:`within` sets one, :func:`time_left` reads it, and
a bulkhead worker thread reads its call's with :func:`call_time_left` (see
:mod:`ragtiller.core.bulkhead`)."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import math
import threading
import time
from collections.abc import Awaitable, Iterator
from dataclasses import dataclass
from typing import Protocol, TypeVar

from ragtiller.errors import DeadlineExceeded, Overloaded

T = TypeVar("T")


class Throttled(Protocol):
    """The call a worker thread runs, as :func:`throttled` and :func:`call_time_left` see it."""

    deadline: float
    throttled_s: float
    throttle_began: float | None


@dataclass
class Scope:
    """One :func:`within` of the running task: its deadline (loop time) and what it saw."""

    until: float
    parent: Scope | None
    overloaded: bool = False
    """A call of this scope was cut while it waited for a worker (or before it ran for all
    its time because it had waited for one)."""


current_scope: contextvars.ContextVar[Scope | None] = contextvars.ContextVar(
    "ragtiller_deadline", default=None
)

worker = threading.local()
"""``job``: the call a worker thread is running (see :func:`call_time_left`)."""


def time_left() -> float:
    """Seconds left before the innermost :func:`within` deadline of this task (inf: none).

    Waits that are not a :meth:`Bulkhead.call` (a Redis lock, a poll) ask this to cut
    themselves to the turn's deadline.
    """
    scope = current_scope.get()
    if scope is None:
        return math.inf
    return scope.until - asyncio.get_running_loop().time()


async def within(awaitable: Awaitable[T], seconds: float) -> T:
    """Await ``awaitable`` for at most ``seconds`` (and never past an enclosing deadline).

    Raises:
        DeadlineExceeded: The deadline passed (the awaitable's own ``TimeoutError``, say a
            provider's HTTP timeout, propagates as it is).
        Overloaded: The deadline passed while the work waited for a bulkhead worker (see
            :meth:`Bulkhead.call`).
    """
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
    """Seconds left before the deadline of the :meth:`Bulkhead.call` this thread runs (inf:
    none, or not on a worker). A provider's own throttle asks it so as never to wait past the
    caller, who would blame the provider for the time."""
    job: Throttled | None = getattr(worker, "job", None)
    return math.inf if job is None else job.deadline - time.monotonic()


@contextlib.contextmanager
def throttled() -> Iterator[None]:
    """Count the time inside as this thread's call waiting (like a wait for a worker), not as
    its provider running: a call cut because it was throttled is :class:`Overloaded`."""
    job: Throttled | None = getattr(worker, "job", None)
    if job is None:
        yield
        return
    job.throttle_began = time.monotonic()
    try:
        yield
    finally:
        job.throttled_s += time.monotonic() - job.throttle_began
        job.throttle_began = None
