"""The shared quota ledger: one Redis counter per resource and day, spent by a Lua script."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from ragtiller.stores._breaker import CircuitBreaker
from ragtiller.stores._quota import QuotaLedger, QuotaWindow
from ragtiller.stores._redis import (
    DEFAULT_CONNECT_TIMEOUT_S,
    DEFAULT_SOCKET_TIMEOUT_S,
    RedisConnection,
    RedisScript,
)

if TYPE_CHECKING:
    import redis
    import redis.asyncio

_SPEND = RedisScript(
    """
local used = tonumber(redis.call('GET', KEYS[1]) or '0')
local n = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
if used + n > limit then
  return {0, limit - used}
end
used = redis.call('INCRBY', KEYS[1], n)
redis.call('EXPIRE', KEYS[1], ARGV[3])
return {1, limit - used}
"""
)

_REFUND = RedisScript(
    """
local used = tonumber(redis.call('GET', KEYS[1]) or '0')
local n = math.min(used, tonumber(ARGV[1]))
if n > 0 then
  redis.call('DECRBY', KEYS[1], n)
end
return used - n
"""
)


class RedisQuotaLedger(QuotaLedger):
    """A quota ledger shared by every process and replica that uses the same Redis and prefix.

    Each resource and window has one counter, ``{prefix}quota:{resource}:{window id}``, changed only
    by Lua scripts (check-and-increment is atomic across processes). A counter expires
    ``expiry_slack_s`` seconds after its window ends. When Redis fails, spending fails closed. A
    timeout after the script ran (or the client's retry of it) can count units that were not
    granted: the ledger errs towards spending less than the budget, never more.

    Example:
        >>> ledger = RedisQuotaLedger({"chat_gen": 20}, url="redis://localhost:6379/0")
        >>> ledger.try_spend("chat_gen")  # doctest: +SKIP
        SpendResult(allowed=True, remaining=19, reason=None)
        >>> ledger.close()
    """

    def __init__(
        self,
        limits: Mapping[str, int],
        *,
        client: redis.Redis | None = None,
        aclient: redis.asyncio.Redis | None = None,
        url: str | None = None,
        prefix: str = "ragtiller:",
        timezone: str = "UTC",
        clock: Callable[[], datetime] | None = None,
        expiry_slack_s: int = 60,
        connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
        socket_timeout_s: float = DEFAULT_SOCKET_TIMEOUT_S,
        breaker: CircuitBreaker | None = None,
    ) -> None:
        """Set the budgets and the Redis to keep them in.

        Args:
            limits: Units allowed per window, per resource name; see :class:`QuotaLedger`.
            client: A sync client, used by the sync methods; never closed by the ledger.
            aclient: A ``redis.asyncio`` client, used by the async methods; never closed by the
                ledger.
            url: Builds the clients not given, with the timeouts below; closed by
                :meth:`close` / :meth:`aclose`.
            prefix: Start of every key the ledger writes.
            timezone: IANA name of the timezone whose calendar day is the window.
            clock: Returns the current time; see :class:`QuotaLedger`.
            expiry_slack_s: How long a counter outlives its window, in seconds.
            connect_timeout_s: Connect timeout of clients built from ``url``, in seconds.
            socket_timeout_s: Read/write timeout of clients built from ``url``, in seconds.
            breaker: Opens after consecutive Redis failures; pass the same one to the ledger and
                the cache of one Redis so that either's failures spare the other the timeouts.
                Default: a breaker of this ledger's own (3 failures, 5 s).

        Raises:
            ConfigurationError: Bad limits, timezone or timeouts, or no client and no URL.
            ImportError: The ``redis`` package is not installed.
        """
        super().__init__(limits, timezone=timezone, clock=clock)
        self._redis = RedisConnection(
            client=client,
            aclient=aclient,
            url=url,
            connect_timeout_s=connect_timeout_s,
            socket_timeout_s=socket_timeout_s,
            breaker=breaker,
        )
        self._prefix = prefix
        self._slack_s = expiry_slack_s

    def key(self, resource: str, window: QuotaWindow) -> str:
        """The Redis key of ``resource``'s counter in ``window``."""
        return f"{self._prefix}quota:{resource}:{window.id}"

    def _spend_args(self, n: int, limit: int, window: QuotaWindow) -> list[str | int]:
        return [n, limit, max(1, math.ceil(window.seconds_left) + self._slack_s)]

    def _spend(self, resource: str, n: int, limit: int, window: QuotaWindow) -> tuple[bool, int]:
        keys, args = [self.key(resource, window)], self._spend_args(n, limit, window)
        allowed, remaining = self._redis.call(lambda c: _SPEND.run(c, keys, args))
        return bool(allowed), int(remaining)

    async def _aspend(
        self, resource: str, n: int, limit: int, window: QuotaWindow
    ) -> tuple[bool, int]:
        keys, args = [self.key(resource, window)], self._spend_args(n, limit, window)
        allowed, remaining = await self._redis.acall(lambda c: _SPEND.arun(c, keys, args))
        return bool(allowed), int(remaining)

    def _refund(self, resource: str, n: int, window: QuotaWindow) -> None:
        keys: list[str] = [self.key(resource, window)]
        self._redis.call(lambda c: _REFUND.run(c, keys, [n]))

    async def _arefund(self, resource: str, n: int, window: QuotaWindow) -> None:
        keys: list[str] = [self.key(resource, window)]
        await self._redis.acall(lambda c: _REFUND.arun(c, keys, [n]))

    def _used(self, resource: str, window: QuotaWindow) -> int:
        key = self.key(resource, window)
        return int(self._redis.call(lambda c: c.get(key)) or 0)

    async def _aused(self, resource: str, window: QuotaWindow) -> int:
        key = self.key(resource, window)
        return int(await self._redis.acall(lambda c: c.get(key)) or 0)

    def _used_many(self, resources: Sequence[str], window: QuotaWindow) -> list[int]:
        if not resources:
            return []
        keys = [self.key(resource, window) for resource in resources]
        return [int(raw or 0) for raw in self._redis.call(lambda c: c.mget(keys))]

    async def _aused_many(self, resources: Sequence[str], window: QuotaWindow) -> list[int]:
        if not resources:
            return []
        keys = [self.key(resource, window) for resource in resources]
        return [int(raw or 0) for raw in await self._redis.acall(lambda c: c.mget(keys))]

    @property
    def available(self) -> bool:
        """Whether a call made now would reach Redis (its breaker is not open); no I/O."""
        return self._redis.available

    @property
    def breaker(self) -> CircuitBreaker:
        """The circuit breaker in front of this ledger's Redis (share it with the cache)."""
        return self._redis.breaker

    def close(self) -> None:
        """Close the clients the ledger built from ``url`` (inside an event loop: :meth:`aclose`)."""
        self._redis.close()

    async def aclose(self) -> None:
        """Close the clients the ledger built from ``url``; await it before the event loop ends."""
        await self._redis.aclose()
