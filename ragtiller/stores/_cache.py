"""The cache: JSON values with a TTL, fail-open, single-flight; in memory and in Redis."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import math
import secrets
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar, cast

from ragtiller.core.breaker import CircuitBreaker
from ragtiller.core.deadlines import time_left
from ragtiller.errors import ConfigurationError, StoreUnavailableError
from ragtiller.stores._redis import (
    DEFAULT_CONNECT_TIMEOUT_S,
    DEFAULT_SOCKET_TIMEOUT_S,
    RedisBacked,
    RedisConnection,
    RedisScript,
    Store,
)

if TYPE_CHECKING:
    import redis
    import redis.asyncio

T = TypeVar("T")

logger = logging.getLogger("ragtiller.stores")

Accept = Callable[[Any], bool]  # whether a cached value is one its reader can use


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
    """A value found or computed, its JSON text (each waiter decodes its own), and whence."""

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


class Cache(Store, ABC):
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
        """The value of ``key``, else ``compute()``'s, cached; misses at once share ONE call."""
        check_ttl(ttl_s)
        found = await self._alookup(key, accept)
        if found is not None:
            return cast(T, found.value), True
        loop = asyncio.get_running_loop()
        flight_key = (loop, key)
        with self._flights_lock:
            if leader := (task := self._aflights.get(flight_key)) is None:
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

    async def _afill(
        self, key: str, compute: Callable[[], Awaitable[T]], ttl_s: float, accept: Accept | None
    ) -> Filled:
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
    """A cache for one process, of JSON texts as in Redis; past ``max_entries``, the oldest goes."""

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


_RELEASE = RedisScript(
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0"
)

_ACQUIRE = RedisScript(
    """
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end
local ttl = redis.call('PTTL', KEYS[1])
if ttl == -1 or ttl > tonumber(ARGV[2]) then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
"""
)
"""Take the compute lock, or leave it to its holder; a lock that would outlive ``lock_ttl_s``
(no expiry, or a longer one: not written by this protocol) is cut to ``lock_ttl_s``."""

_CLEAR_BATCH = 500
MAX_ENTRY_BYTES = 1 << 20
"""Largest entry read; a longer one (never ragtiller's) is a miss, and no more crosses the wire."""


def _bounded(key: str, raw: bytes | str | None) -> str | None:
    if not raw:
        return None
    if len(raw) > MAX_ENTRY_BYTES:
        logger.warning(
            "cache entry %s is longer than %d bytes; treated as a miss", key, MAX_ENTRY_BYTES
        )
        return None
    return raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw


class RedisCache(RedisBacked, Cache):
    """A cache shared by every process on the same Redis and prefix: identical misses share one
    computation through a lock, which a waiter gives up on in time (docs/redis.md)."""

    def __init__(
        self,
        *,
        client: redis.Redis | None = None,
        aclient: redis.asyncio.Redis | None = None,
        url: str | None = None,
        prefix: str = "ragtiller:",
        lock_ttl_s: float = 15.0,
        lock_wait_s: float = 10.0,
        poll_interval_s: float = 0.05,
        connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
        socket_timeout_s: float = DEFAULT_SOCKET_TIMEOUT_S,
        breaker: CircuitBreaker | None = None,
    ) -> None:
        """No I/O here; clients built from ``url`` are closed by ``close``."""
        if not (lock_ttl_s > 0 and lock_wait_s >= 0 and poll_interval_s > 0):
            raise ConfigurationError(
                "lock_ttl_s and poll_interval_s must be > 0 and lock_wait_s >= 0, but got "
                f"{lock_ttl_s!r}, {poll_interval_s!r} and {lock_wait_s!r}"
            )
        super().__init__()
        self._redis = RedisConnection(
            client=client,
            aclient=aclient,
            url=url,
            connect_timeout_s=connect_timeout_s,
            socket_timeout_s=socket_timeout_s,
            breaker=breaker,
        )
        self._prefix = prefix
        self._lock_px = max(1, round(lock_ttl_s * 1000))
        self._lock_wait_s = lock_wait_s
        self._poll_s = poll_interval_s

    def key(self, key: str) -> str:
        return f"{self._prefix}cache:{key}"

    def lock_key(self, key: str) -> str:
        return f"{self._prefix}cache-lock:{key}"

    def clear(self) -> None:
        """Delete every entry under the prefix (``SCAN``); a failure raises, unlike reads."""
        escaped = "".join("\\" + ch if ch in "*?[]\\" else ch for ch in self._prefix)
        pattern = escaped + "cache:*"

        def run(client: redis.Redis) -> None:
            batch: list[bytes | str] = []
            for name in client.scan_iter(match=pattern, count=_CLEAR_BATCH):
                batch.append(name)
                if len(batch) == _CLEAR_BATCH:
                    client.delete(*batch)
                    batch.clear()
            if batch:
                client.delete(*batch)

        self._redis.call(run)

    async def _aget_text(self, key: str) -> str | None:
        name = self.key(key)
        raw = await self._redis.acall(lambda c: c.getrange(name, 0, MAX_ENTRY_BYTES))
        return _bounded(key, raw)

    async def _aset_text(self, key: str, text: str, ttl_s: float) -> None:
        name, px = self.key(key), max(1, round(ttl_s * 1000))
        await self._redis.acall(lambda c: c.set(name, text, px=px))

    async def _afill(
        self,
        key: str,
        compute: Callable[[], Awaitable[T]],
        ttl_s: float,
        accept: Accept | None,
    ) -> Filled:
        token = secrets.token_hex(16)
        try:
            found, locked = await self._await_turn(key, token, accept)
        except StoreUnavailableError as e:
            logger.warning("cache unavailable; computing %s without the lock: %s", key, e)
            found, locked = None, False
        if found is not None:
            return found
        try:
            return await super()._afill(key, compute, ttl_s, accept)
        finally:
            if locked:
                await self._arelease(key, token)

    async def _await_turn(
        self, key: str, token: str, accept: Accept | None
    ) -> tuple[Filled | None, bool]:
        keys, args = [self.lock_key(key)], [token, str(self._lock_px)]
        wait_s = max(0.0, min(self._lock_wait_s, time_left() / 2))
        deadline = time.monotonic() + wait_s
        while True:
            locked = bool(await self._redis.acall(lambda c: _ACQUIRE.arun(c, keys, args)))
            try:
                found = decode(key, await self._aget_text(key), accept)
            except StoreUnavailableError:
                if locked:  # an entry that cannot be read: computed under this lock
                    return None, True
                raise
            if found is not None:
                if locked:
                    await self._arelease(key, token)
                return found, False
            if locked:
                return None, True
            left = deadline - time.monotonic()
            if left <= 0:
                logger.info("waited %.2f s for another process's %s; computing it", wait_s, key)
                return None, False
            await asyncio.sleep(min(self._poll_s, left))

    async def _arelease(self, key: str, token: str) -> None:
        keys: list[str] = [self.lock_key(key)]
        try:
            await self._redis.acall(lambda c: _RELEASE.arun(c, keys, [token]))
        except StoreUnavailableError as e:
            logger.warning("cache unavailable; lock of %s left to expire: %s", key, e)
