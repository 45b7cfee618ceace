"""The cache contract: JSON values with a TTL, fail-open reads and writes, single-flight."""

from __future__ import annotations

import asyncio
import json
import logging
import math
import threading
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar, cast

from ragtiller.errors import StoreUnavailableError

T = TypeVar("T")

logger = logging.getLogger("ragtiller.stores")

Accept = Callable[[Any], bool]
"""Whether a cached value is one its reader can use; a value it refuses is a miss."""


@dataclass(frozen=True)
class Filled:
    """A value found in or put into the cache.

    Attributes:
        value: The value (as computed, or decoded from the cache).
        text: Its JSON text, which waiters of a single flight decode into their own copy.
        from_cache: Whether the value came from the cache rather than this caller's compute.
    """

    value: Any
    text: str
    from_cache: bool


def dumps(value: Any) -> str:
    """Encode a cache value as JSON.

    Raises:
        TypeError: ``value`` is not JSON-serialisable.
    """
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError) as e:
        raise TypeError(
            f"cache values must be JSON-serialisable, but got {type(value).__name__}: {e}"
        ) from e


def check_ttl(ttl_s: float) -> None:
    """Reject a TTL that is not a positive, finite number of seconds.

    Raises:
        ValueError: ``ttl_s`` is not > 0 or not finite.
    """
    if not (ttl_s > 0 and math.isfinite(ttl_s)):
        raise ValueError(f"ttl_s must be a finite number of seconds > 0, but got {ttl_s!r}")


class Cache(ABC):
    """TTL cache of JSON-serialisable values, with single-flight.

    Values round-trip through JSON (a tuple comes back as a list). A store failure never raises:
    reads become misses and writes are dropped, both logged on the ``ragtiller.stores`` logger.
    :meth:`aget` cannot tell a cached ``None`` from a miss; :meth:`aget_or_compute` can and caches
    ``None`` like any other value. Tasks of one event loop share computations; tasks of two loops
    missing the same key at once compute twice.

    Example:
        >>> import asyncio
        >>> from ragtiller.stores import MemoryCache, cache_key
        >>> cache = MemoryCache()
        >>> key = cache_key("step-back", "How do I start?")
        >>> async def answer(text):
        ...     return text
        >>> asyncio.run(cache.aget_or_compute(key, lambda: answer("getting started"), ttl_s=3600))
        ('getting started', False)
        >>> asyncio.run(cache.aget_or_compute(key, lambda: answer("never called"), ttl_s=3600))
        ('getting started', True)
    """

    def __init__(self) -> None:
        """Prepare the in-process single-flight registry."""
        self._flights_lock = threading.Lock()
        self._aflights: dict[tuple[asyncio.AbstractEventLoop, str], asyncio.Task[Filled]] = {}

    async def aget(self, key: str) -> Any | None:
        """The cached value of ``key``, or None on a miss, an expired entry or a store failure."""
        found = await self._alookup(key)
        return None if found is None else found.value

    async def aset(self, key: str, value: Any, ttl_s: float) -> None:
        """Cache ``value`` under ``key`` for ``ttl_s`` seconds; a store failure is logged.

        Raises:
            TypeError: ``value`` is not JSON-serialisable.
            ValueError: ``ttl_s`` is not a positive, finite number.
        """
        check_ttl(ttl_s)
        await self._astore(key, dumps(value), ttl_s)

    async def aget_or_compute(
        self,
        key: str,
        compute: Callable[[], Awaitable[T]],
        ttl_s: float,
        *,
        accept: Accept | None = None,
    ) -> tuple[T, bool]:
        """The cached value of ``key``, or ``await compute()`` cached for ``ttl_s`` seconds.

        Tasks of one event loop that miss the same key at the same time wait for ONE
        computation. If it raises, every waiter gets the exception and nothing is cached. A
        cached value that ``accept`` refuses (written by another tool or version, or by hand) is
        a miss, logged, and the computed value replaces it.

        The computation runs in its own task, so cancelling the caller that started it does not
        cancel it for the others. It runs in the context of that caller, so an enclosing
        :func:`ragtiller.core.bulkhead.within` deadline bounds its waits (see :class:`RedisCache`).

        Returns:
            The value, and whether it came from the cache (or from another caller's computation):
            False only for the caller whose ``compute`` ran.

        Raises:
            TypeError: The computed value is not JSON-serialisable.
            ValueError: ``ttl_s`` is not a positive, finite number.
        """
        check_ttl(ttl_s)
        found = await self._alookup(key, accept)
        if found is not None:
            return cast(T, found.value), True
        loop = asyncio.get_running_loop()
        flight_key = (loop, key)
        with self._flights_lock:
            task = self._aflights.get(flight_key)
            leader = task is None
            if task is None:
                task = loop.create_task(self._aflight(key, compute, ttl_s, accept))
                self._aflights[flight_key] = task
                task.add_done_callback(partial(self._aflight_done, flight_key))
        filled = await asyncio.shield(task)
        if leader:
            return cast(T, filled.value), filled.from_cache
        return cast(T, json.loads(filled.text)), True

    async def _aflight(
        self,
        key: str,
        compute: Callable[[], Awaitable[T]],
        ttl_s: float,
        accept: Accept | None,
    ) -> Filled:
        found = await self._alookup(key, accept)
        return found if found is not None else await self._afill(key, compute, ttl_s, accept)

    def _aflight_done(
        self, flight_key: tuple[asyncio.AbstractEventLoop, str], task: asyncio.Task[Filled]
    ) -> None:
        with self._flights_lock:
            self._aflights.pop(flight_key, None)
        if not task.cancelled():
            task.exception()  # retrieved: the callers that awaited it have raised it already

    @property
    def available(self) -> bool:
        """Whether a call made now would reach the store; no I/O (always True in memory)."""
        return True

    @abstractmethod
    def clear(self) -> None:
        """Remove every entry of this cache."""

    def close(self) -> None:  # noqa: B027 - a no-op unless the backend holds connections
        """Release connections this cache opened (nothing to do in memory)."""

    async def aclose(self) -> None:
        """Release connections this cache opened, the asyncio ones included."""
        self.close()

    async def _afill(
        self,
        key: str,
        compute: Callable[[], Awaitable[T]],
        ttl_s: float,
        accept: Accept | None,
    ) -> Filled:
        """Compute the value of a missed key and cache it (``accept``: see the Redis cache)."""
        value = await compute()
        text = dumps(value)
        await self._astore(key, text, ttl_s)
        return Filled(value, text, from_cache=False)

    async def _alookup(self, key: str, accept: Accept | None = None) -> Filled | None:
        try:
            return decode(key, await self._aget_text(key), accept)
        except StoreUnavailableError as e:
            logger.warning("cache unavailable; %s is a miss: %s", key, e)
            return None

    async def _astore(self, key: str, text: str, ttl_s: float) -> None:
        try:
            await self._aset_text(key, text, ttl_s)
        except StoreUnavailableError as e:
            logger.warning("cache unavailable; %s not stored: %s", key, e)

    @abstractmethod
    async def _aget_text(self, key: str) -> str | None:
        """The JSON text cached under ``key``, or None.

        Raises:
            StoreUnavailableError: The store failed.
        """

    @abstractmethod
    async def _aset_text(self, key: str, text: str, ttl_s: float) -> None:
        """Cache JSON ``text`` under ``key`` for ``ttl_s`` seconds.

        Raises:
            StoreUnavailableError: The store failed.
        """


def decode(key: str, text: str | None, accept: Accept | None = None) -> Filled | None:
    """The cache entry ``text`` of ``key`` decoded, or None when absent, not JSON, or refused
    by ``accept`` (both logged)."""
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError as e:
        logger.warning("cache entry %s is not JSON; treated as a miss: %s", key, e)
        return None
    if accept is not None and not accept(value):
        logger.warning(
            "cache entry %s (%d characters) is not a value its reader accepts; treated as a miss",
            key,
            len(text),
        )
        return None
    return Filled(value, text, from_cache=True)
