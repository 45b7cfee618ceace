"""The shared quota ledger: one Redis counter per budget and day, changed by one Lua script."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING

from ragtiller.core.breaker import CircuitBreaker
from ragtiller.errors import StoreUnavailableError
from ragtiller.stores._quota import Counter, Day, QuotaLedger, QuotaWindow
from ragtiller.stores._redis import (
    DEFAULT_CONNECT_TIMEOUT_S,
    DEFAULT_SOCKET_TIMEOUT_S,
    RedisBacked,
    RedisConnection,
    RedisScript,
)

if TYPE_CHECKING:
    import redis.asyncio

_CHANGE = RedisScript(
    """
local now = tonumber(ARGV[1])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) + tonumber(t[2]) / 1000000
end
local days = tonumber(ARGV[2])
local pick = nil
for i = 1, days do
  if now >= tonumber(ARGV[1 + 2 * i]) and now < tonumber(ARGV[2 + 2 * i]) then
    pick = i
    break
  end
end
if not pick then return {-2, 0, 0} end
local base = 2 + 2 * days
local n = tonumber(ARGV[base + 1])
local used, fits = {}, n > 0
for c = 1, #KEYS / days do
  local raw = redis.call('GET', KEYS[(c - 1) * days + pick])
  if raw and not string.match(raw, '^%d+$') then return {-1, pick, c} end
  used[c] = tonumber(raw or 0)
  if used[c] + n > tonumber(ARGV[base + 2 + c]) then fits = false end
end
local reply = {fits and 1 or 0, pick, 0}
for c = 1, #used do
  local key = KEYS[(c - 1) * days + pick]
  if fits then
    used[c] = redis.call('INCRBY', key, n)
    local expiry = math.ceil(tonumber(ARGV[2 + 2 * pick]) - now) + tonumber(ARGV[base + 2])
    redis.call('EXPIRE', key, math.max(1, expiry))
  elseif n < 0 and used[c] > 0 then
    used[c] = redis.call('DECRBY', key, math.min(used[c], -n))
  end
  reply[#reply + 1] = math.max(0, tonumber(ARGV[base + 2 + c]) - used[c])
end
return reply
"""
)
"""``ARGV``: the time (empty: the store's ``TIME``), the number of candidate days, their
``start, end`` pairs, then ``n``, the expiry slack and each counter's limit; ``KEYS``: each
counter's candidate days in turn. In the picked day, ``n > 0`` spends (every counter or none),
``n < 0`` refunds (never below 0), 0 reads. Replies ``{spent (1 or 0), day, 0, left...}``,
``{-1, day, c}`` (counter ``c`` is not a count) or ``{-2, 0, 0}`` (no day holds the time)."""


class RedisQuotaLedger(RedisBacked, QuotaLedger):
    """A quota ledger shared by every replica on the same Redis and prefix (``docs/redis.md``).

    One counter per resource and day, ``{prefix}quota:{resource}:{date}``, and one per tenant
    under a per-tenant limit, ``{prefix}quota@{tenant as UTF-8 hex}:{resource}:{date}``. The day
    is the store's (``TIME``), so replicas with skewed clocks share one; with ``clock=``, that
    clock's. A counter that is not a count fails closed until fixed; a timeout after the script
    ran errs towards spending less than the budget, never more.

    Example:
        >>> import asyncio
        >>> ledger = RedisQuotaLedger({"chat_gen": 20}, url="redis://localhost:6379/0")
        >>> asyncio.run(ledger.atry_spend("chat_gen"))  # doctest: +SKIP
        SpendResult(allowed=True, remaining=19, reason=None, budget='shared')
        >>> ledger.close()
    """

    def __init__(
        self,
        limits: Mapping[str, int],
        *,
        tenant_limits: Mapping[str, int] | None = None,
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
        """Clients built from ``url`` are closed by ``close``; share ``breaker`` with the cache."""
        super().__init__(limits, tenant_limits=tenant_limits, timezone=timezone, clock=clock)
        self._redis = RedisConnection(
            client=None,
            aclient=aclient,
            url=url,
            connect_timeout_s=connect_timeout_s,
            socket_timeout_s=socket_timeout_s,
            breaker=breaker,
        )
        self._prefix = prefix
        self._slack_s = expiry_slack_s
        self._store_clock = clock is None
        self._around: tuple[date, list[Day], list[str | int]] | None = None

    def _key(self, counter: Counter, day_id: str) -> str:
        resource, tenant = counter
        owner = "" if tenant is None else "@" + tenant.encode("utf-8", "surrogatepass").hex()
        return f"{self._prefix}quota{owner}:{resource}:{day_id}"

    def _days(self) -> tuple[list[Day], list[str | int]]:
        """The candidate days, and the script arguments that pick one."""
        now = self.now()
        today = self.today(now)
        if not self._store_clock:
            day = self.day(today)
            return [day], [repr(now.timestamp()), 1, repr(day.start), repr(day.end)]
        known = self._around
        if known is None or known[0] != today:  # computed once a day, not once a call
            days = [self.day(today + timedelta(days=k)) for k in (-1, 0, 1)]
            spans = [repr(edge) for day in days for edge in (day.start, day.end)]
            known = self._around = (today, days, ["", len(days), *spans])
        return known[1], list(known[2])

    async def _achange(
        self, counters: Sequence[tuple[Counter, int]], n: int, window: QuotaWindow
    ) -> tuple[bool, list[int]]:
        days, args = self._days()
        keys = [self._key(counter, day.id) for counter, _ in counters for day in days]
        args += [n, self._slack_s, *(limit for _, limit in counters)]
        status, pick, *left = await self._redis.acall(lambda c: _CHANGE.arun(c, keys, args))
        if int(status) == -2:
            raise StoreUnavailableError(
                f"the store's clock is more than a day from this replica's ({self.now()}); "
                "check both clocks"
            )
        if int(status) == -1:
            key = self._key(counters[int(left[0]) - 1][0], days[int(pick) - 1].id)
            raise StoreUnavailableError(
                f"quota counter {key} does not hold a count of units (written by hand or by "
                "another tool?); fix or delete it"
            )
        return int(status) == 1, [int(x) for x in left[1:]]
