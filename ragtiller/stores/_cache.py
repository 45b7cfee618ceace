"""The cache: JSON values with a TTL, fail-open reads and writes, single-flight; in memory here."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import math
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar, cast

from ragtiller.errors import ConfigurationError, StoreUnavailableError

T = TypeVar("T")

logger = logging.getLogger("ragtiller.stores")

Accept = Callable[[Any], bool]
"""Whether a cached value is one its reader can use; a value it refuses is a miss."""


def cache_key(*parts: str) -> str:
    """A SHA-256 key of ``parts`` casefolded, whitespace collapsed: no query text reaches the
    store, and (``surrogatepass``) two different normalized texts never share a key.

    Example:
        >>> a = cache_key("step-back", "  How do I   START? ")
        >>> a == cache_key("Step-Back", "how do i start?")
        True
        >>> len(cache_key("step-back", "lift \\udcff?"))
        64
    """
    normalized = "\x1f".join(" ".join(part.casefold().split()) for part in parts)
    return hashlib.sha256(normalized.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class Filled:
    """A value found or computed, with its JSON text (each single-flight waiter decodes its
    own copy) and whether it came from the cache."""

    value: Any
    text: str
    from_cache: bool


def dumps(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError) as e:
        raise TypeError(
            f"cache values must be JSON-serialisable, but got {type(value).__name__}: {e}"
        ) from e


def check_ttl(ttl_s: float) -> None:
    if not (ttl_s > 0 and math.isfinite(ttl_s)):
        raise ValueError(f"ttl_s must be a finite number of seconds > 0, but got {ttl_s!r}")


def decode(key: str, text: str | None, accept: Accept | None = None) -> Filled | None:
    """The entry ``text`` of ``key``, or None when absent, not JSON or refused (logged)."""
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


class Cache(ABC):
    """TTL cache of JSON values (a tuple comes back a list), single-flight per event loop; a
    store failure never raises (reads miss, writes are dropped, logged).

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
        self._flights_lock = threading.Lock()
        self._aflights: dict[tuple[asyncio.AbstractEventLoop, str], asyncio.Task[Filled]] = {}

    @property
    def available(self) -> bool:
        """Whether a call made now would reach the store; no I/O."""
        return True

    async def aget(self, key: str) -> Any | None:
        """The cached value of ``key``, or None (a miss, an expired entry, a store failure)."""
        found = await self._alookup(key)
        return None if found is None else found.value

    async def aset(self, key: str, value: Any, ttl_s: float) -> None:
        """Cache ``value`` for ``ttl_s`` seconds; a store failure is logged."""
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
        """The cached value of ``key`` (``accept`` refusing it: a miss), or ``await compute()``
        cached for ``ttl_s`` s, and whether it came from the cache or another caller. Misses at
        once share ONE computation (its exception reaches all, nothing cached), in a task of its
        own (cancelling its first caller spares the others) in that caller's context (its
        deadline bounds the waits)."""
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
        self, key: str, compute: Callable[[], Awaitable[T]], ttl_s: float, accept: Accept | None
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

    @abstractmethod
    def clear(self) -> None:
        """Remove every entry of this cache."""

    def close(self) -> None:  # noqa: B027 - a no-op unless the backend holds connections
        """Release connections this cache opened."""

    async def aclose(self) -> None:
        """Release connections this cache opened, the asyncio ones included."""
        self.close()

    async def _afill(
        self, key: str, compute: Callable[[], Awaitable[T]], ttl_s: float, accept: Accept | None
    ) -> Filled:
        """Compute a missed key's value and cache it (``accept``: for the Redis cache)."""
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
        """The JSON text under ``key``, or None; raises ``StoreUnavailableError``."""

    @abstractmethod
    async def _aset_text(self, key: str, text: str, ttl_s: float) -> None:
        """Store JSON ``text`` under ``key`` for ``ttl_s`` s; raises ``StoreUnavailableError``."""


class MemoryCache(Cache):
    """A cache for one process, of JSON texts as in Redis; past ``max_entries``, the oldest goes.

    Example:
        >>> import asyncio
        >>> cache = MemoryCache()
        >>> asyncio.run(cache.aset("k", {"ids": [1, 2]}, ttl_s=60))
        >>> asyncio.run(cache.aget("k"))
        {'ids': [1, 2]}
    """

    def __init__(
        self, *, clock: Callable[[], float] = time.monotonic, max_entries: int = 10_000
    ) -> None:
        if max_entries < 1:
            raise ConfigurationError(f"max_entries must be >= 1, but got {max_entries}")
        super().__init__()
        self._clock = clock
        self._max_entries = max_entries
        self._lock = threading.Lock()
        self._entries: dict[str, tuple[float, str]] = {}

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    async def _aget_text(self, key: str) -> str | None:
        with self._lock:
            expires_at, text = self._entries.get(key, (math.inf, None))
            if text is not None and self._clock() >= expires_at:
                del self._entries[key]
                return None
            return text

    async def _aset_text(self, key: str, text: str, ttl_s: float) -> None:
        with self._lock:
            self._entries.pop(key, None)
            if len(self._entries) >= self._max_entries:
                del self._entries[next(iter(self._entries))]
            self._entries[key] = (self._clock() + ttl_s, text)
