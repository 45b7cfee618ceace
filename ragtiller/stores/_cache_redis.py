"""The shared cache: JSON values in Redis, one computation per key across processes."""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

from ragtiller.core.breaker import CircuitBreaker
from ragtiller.core.deadlines import time_left
from ragtiller.errors import ConfigurationError, StoreUnavailableError
from ragtiller.stores._cache import Accept, Cache, Filled, decode, logger
from ragtiller.stores._redis import (
    DEFAULT_CONNECT_TIMEOUT_S,
    DEFAULT_SOCKET_TIMEOUT_S,
    RedisBacked,
    RedisConnection,
    RedisScript,
)

if TYPE_CHECKING:
    import redis
    import redis.asyncio

T = TypeVar("T")

_RELEASE = RedisScript(
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0"
)

_ACQUIRE = RedisScript(
    """
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return 1
end
local ttl = redis.call('PTTL', KEYS[1])
if ttl == -1 or ttl > tonumber(ARGV[2]) then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""
)
"""Take the compute lock, or leave it to its holder; a lock that would outlive ``lock_ttl_s``
(no expiry, or a longer one: not written by this protocol) is cut to ``lock_ttl_s``."""

_CLEAR_BATCH = 500

MAX_ENTRY_BYTES = 1 << 20
"""Largest entry read; a longer one (never ragtiller's) is a miss, and no more crosses the wire."""


def _bounded(key: str, raw: bytes | str | None) -> str | None:
    """An entry read with ``GETRANGE`` (empty when absent), or None when absent or too long."""
    if not raw:
        return None
    if len(raw) > MAX_ENTRY_BYTES:
        logger.warning(
            "cache entry %s is longer than %d bytes; treated as a miss", key, MAX_ENTRY_BYTES
        )
        return None
    return raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw


class RedisCache(RedisBacked, Cache):
    """A cache shared by every process on the same Redis and prefix (``docs/redis.md``).

    Identical misses across processes share one computation through a lock
    (``{prefix}cache-lock:{key}``) while the others poll; a waiter computes anyway after
    ``lock_wait_s`` or half the time its caller has left, so a dead process's lock costs a turn
    part of its deadline, never more. When Redis fails, computing goes on without the lock.

    Example:
        >>> import asyncio
        >>> cache = RedisCache(url="redis://localhost:6379/0", prefix="myapp:")
        >>> asyncio.run(cache.aset("k", 42, ttl_s=60))  # doctest: +SKIP
        >>> cache.close()
    """

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
        """No I/O here. ``client`` (used by :meth:`clear`) and ``aclient`` are never closed
        by the cache; clients built from ``url`` are. Share ``breaker`` with the ledger."""
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
        """Delete every entry under the prefix (``SCAN``, never ``KEYS``; quota keys are kept).
        Raises ``StoreUnavailableError``: a clear that did not happen must not pass silently."""
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
        """Wait (at most ``lock_wait_s`` or half the caller's time left) until another process
        has cached ``key`` (its value) or this one holds its lock (whether it does)."""
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
                logger.info(
                    "waited %.2f s for another process to compute %s; computing it here",
                    wait_s,
                    key,
                )
                return None, False
            await asyncio.sleep(min(self._poll_s, left))

    async def _arelease(self, key: str, token: str) -> None:
        keys: list[str] = [self.lock_key(key)]
        try:
            await self._redis.acall(lambda c: _RELEASE.arun(c, keys, [token]))
        except StoreUnavailableError as e:
            logger.warning("cache unavailable; lock of %s left to expire: %s", key, e)
