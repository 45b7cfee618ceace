"""Pinecone calls in daemon threads under one deadline, bounded in flight, failing as one error.

Shared by the dense and lexical tiers (:mod:`ragtiller.pinecone.tiers`), so both fail, time out
and give up on a stuck index the same way. See ``docs/pinecone.md``.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from concurrent import futures
from typing import TypeVar

from ragtiller.core.bulkhead import Overloaded
from ragtiller.errors import ConfigurationError
from ragtiller.errors import PineconeTierError as PineconeTierError  # re-exported
from ragtiller.errors import PineconeTimeoutError as PineconeTimeoutError

T = TypeVar("T")

RESERVED_NAMESPACE_PREFIX = "__ragtiller"
"""Namespaces ragtiller keeps for itself (the BM25 statistics); never searched as a route's."""


class InFlightLimit:
    """At most ``limit`` calls in flight to one Pinecone index; a call beyond waits for a slot
    within its deadline (admission, not shedding).

    A call abandoned at its deadline holds its slot until the SDK gives up, so a stuck index
    cannot pile up threads: once abandoned calls hold every slot, searches fail at once
    (:class:`PineconeTierError`, and fall back when the policy says so). Healthy calls holding
    every slot until the deadline are :class:`~ragtiller.core.bulkhead.Overloaded` (queueing,
    not Pinecone's failure). The per-tier bulkhead bounds the searches; this bounds the calls
    they fan out to (one per namespace), which outlive a search that timed out.

    Example:
        >>> InFlightLimit(4).limit
        4
    """

    def __init__(self, limit: int = 16) -> None:
        if limit < 1:
            raise ConfigurationError(f"max_in_flight must be >= 1, but got {limit}")
        self.limit = limit
        self._in_flight = 0
        self._abandoned: set[int] = set()
        self._freed = threading.Condition()

    @property
    def count(self) -> int:
        """Calls started and not yet ended (abandoned ones included)."""
        with self._freed:
            return self._in_flight

    def start(self, fn: Callable[[], T], namespace: str, deadline: float) -> futures.Future[T]:
        """Run ``fn`` in a daemon thread holding a slot, waiting for one until ``deadline``
        (``time.monotonic()``)."""
        with self._freed:
            while not self._admit(namespace):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise self._overloaded(namespace)
                self._freed.wait(left)
        return self._start(fn)

    async def astart(
        self, fn: Callable[[], T], namespace: str, deadline: float
    ) -> futures.Future[T]:
        """:meth:`start` for the event loop: the wait for a slot never blocks the loop."""
        while True:
            with self._freed:
                if self._admit(namespace):
                    return self._start(fn)
            if time.monotonic() >= deadline:
                raise self._overloaded(namespace)
            await asyncio.sleep(min(0.01, max(0.0, deadline - time.monotonic())))

    def _admit(self, namespace: str) -> bool:
        """Take a slot if one is free (the caller holds the lock)."""
        if self._in_flight < self.limit:
            self._in_flight += 1
            return True
        if len(self._abandoned) >= self.limit:
            raise PineconeTierError(
                f"{self.limit} Pinecone calls already in flight (namespace {namespace!r}): the "
                "index is slow or stuck; refusing more until they end",
                status_code=None,
                namespace=namespace,
            )
        return False

    def _overloaded(self, namespace: str) -> Overloaded:
        return Overloaded(
            f"{self.limit} healthy Pinecone calls held every slot until the deadline "
            f"(namespace {namespace!r}): the tier is busy, not failing"
        )

    def _start(self, fn: Callable[[], T]) -> futures.Future[T]:
        """Run ``fn`` in a new daemon thread (one that never delays exit) holding a slot."""
        future: futures.Future[T] = futures.Future()

        def run() -> None:
            try:
                if future.set_running_or_notify_cancel():
                    try:
                        future.set_result(fn())
                    except BaseException as e:  # handed to whoever waits on the future
                        future.set_exception(e)
            finally:
                with self._freed:
                    self._in_flight -= 1
                    self._abandoned.discard(id(future))
                    self._freed.notify()

        threading.Thread(target=run, name="ragtiller-pinecone", daemon=True).start()
        return future

    def wait(
        self, future: futures.Future[T], deadline: float, timeout_s: float, namespace: str
    ) -> T:
        """The call's result by ``deadline``; past it the call is abandoned (timeout error)."""
        futures.wait([future], timeout=max(0.0, deadline - time.monotonic()))
        if not future.done():
            raise self._abandon(future, timeout_s, namespace)
        return call_result(future.result, namespace)

    async def await_(
        self, future: futures.Future[T], deadline: float, timeout_s: float, namespace: str
    ) -> T:
        """:meth:`wait` for the event loop."""
        waiter = asyncio.wrap_future(future)
        done, _ = await asyncio.wait([waiter], timeout=max(0.0, deadline - time.monotonic()))
        if not done:
            waiter.cancel()
            raise self._abandon(future, timeout_s, namespace)
        return call_result(waiter.result, namespace)  # read from the waiter: asyncio sees it read

    def _abandon(
        self, future: futures.Future[T], timeout_s: float, namespace: str
    ) -> PineconeTimeoutError:
        with self._freed:
            if not future.done():
                self._abandoned.add(id(future))
        return PineconeTimeoutError(
            f"Pinecone did not answer within {timeout_s:g} s (namespace {namespace!r}); the SDK "
            "retries HTTP 5xx internally, so a failing service can look like a slow one",
            status_code=None,
            namespace=namespace,
        )


def require_langchain_pinecone() -> None:
    """Fail early, with the install hint, when the ``pinecone`` extra is missing."""
    try:
        import langchain_pinecone  # noqa: F401
    except ImportError as e:
        raise ImportError(
            "the Pinecone tiers need langchain-pinecone: pip install 'ragtiller[pinecone]'"
        ) from e


def call_result(get: Callable[[], T], namespace: str) -> T:
    """``get()``, with transport and API failures as :class:`PineconeTierError`."""
    from pinecone.exceptions import PineconeApiException, PineconeException
    from urllib3.exceptions import HTTPError

    try:
        return get()
    except PineconeApiException as e:
        status = int(e.status) if e.status else None
        reason = f" {e.reason}" if e.reason else ""
        raise PineconeTierError(
            f"Pinecone answered HTTP {status}{reason} (namespace {namespace!r})",
            status_code=status,
            namespace=namespace,
        ) from e
    except (PineconeException, HTTPError, OSError) as e:
        raise PineconeTierError(
            f"Pinecone request failed (namespace {namespace!r}): {e}",
            status_code=None,
            namespace=namespace,
        ) from e
