"""The shared quota ledger: one Redis counter per resource and day, spent by a Lua script."""

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
    import redis
    import redis.asyncio

_DAY = """
local now = tonumber(ARGV[1])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) + tonumber(t[2]) / 1000000
end
local pick = nil
for i = 1, tonumber(ARGV[2]) do
  if now >= tonumber(ARGV[1 + 2 * i]) and now < tonumber(ARGV[2 + 2 * i]) then
    pick = i
    break
  end
end
local function count(raw)
  if not raw then return 0 end
  if not string.match(raw, '^%d+$') then return nil end
  return tonumber(raw)
end
"""
"""Picks the window: ``ARGV[1]`` is the time (empty: the store's own, ``TIME``), ``ARGV[2]``
the number of candidate days and ``ARGV[3..]`` their ``start, end`` pairs; ``count`` reads a
counter (None when it is not a string of digits). The day's argument list ends at
``ARGV[2 + 2 * days]``; a script's own arguments follow."""

_CHANGE = RedisScript(
    _DAY
    + """
if not pick then return {-2, 0, 0} end
local days = tonumber(ARGV[2])
local base = 2 + 2 * days
local n = tonumber(ARGV[base + 1])
local used, fits = {}, n > 0
for c = 1, #KEYS / days do
  used[c] = count(redis.call('GET', KEYS[(c - 1) * days + pick]))
  if not used[c] then return {-1, pick, c} end
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
"""Change the picked day's counters by ``ARGV[base + 1]`` units: a spend (> 0) adds them to
every counter unless one would pass its limit (``ARGV[base + 2 + c]``; then to none), a refund
(< 0) takes them from each, never below 0, and 0 only reads; a spent counter expires
``ARGV[base + 2]`` seconds after its day. ``KEYS`` holds each counter's candidate days in turn.
Replies ``{1 or 0 (spent or not), day, 0, left of each counter...}``, ``{-1, day, c}`` (counter
``c`` is not a count) or ``{-2, 0, 0}`` (no candidate day holds the store's time)."""


class RedisQuotaLedger(RedisBacked, QuotaLedger):
    """A quota ledger shared by every process and replica that uses the same Redis and prefix.

    Each resource and window has one counter, ``{prefix}quota:{resource}:{window id}`` (and one
    per tenant under a per-tenant limit, see :meth:`key`), changed only by one Lua script
    (check-and-increment of both is atomic across processes). A counter expires
    ``expiry_slack_s`` seconds after its window ends. When Redis fails, spending fails closed. A
    timeout after the script ran (or the client's retry of it) can count units that were not
    granted: the ledger errs towards spending less than the budget, never more.

    **The day is the store's.** Without ``clock=``, each script reads Redis's own clock
    (``TIME``) and picks the day it falls in, among yesterday, today and tomorrow by this
    replica's clock: replicas whose clocks disagree still count every call in the same day's
    counter, and that day turns at the same instant for all of them (the store's midnight in
    ``timezone``). A replica more than a day off the store fails closed. With ``clock=`` (tests,
    a single process), that clock decides the day instead.

    A counter that is not a string of digits (``abc``, ``5.5``, ``-3``, a hash: written by hand or
    another tool) makes every read and spend of it fail closed, reason
    ``quota-store-unavailable``, logged with its key, until it is fixed or deleted; a count
    beyond the limit, however large, is a spent budget.

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
        """Set the budgets and the Redis to keep them in.

        Args:
            limits: Units allowed per window, per resource name; see :class:`QuotaLedger`.
            tenant_limits: Units each tenant may spend per window, per resource.
            aclient: A ``redis.asyncio`` client; never closed by the ledger.
            url: Builds an asyncio client per event loop, with the timeouts below (when no
                ``aclient`` is given); closed by :meth:`close` / :meth:`aclose`.
            prefix: Start of every key the ledger writes.
            timezone: IANA name of the timezone whose calendar day is the window.
            clock: Returns the current time, and then decides the day (see :class:`QuotaLedger`).
                Default None: Redis's own clock decides it, the same for every replica.
            expiry_slack_s: How long a counter outlives its window, in seconds.
            connect_timeout_s: Connect timeout of clients built from ``url``, in seconds.
            socket_timeout_s: Read/write timeout of clients built from ``url``, in seconds.
            breaker: Opens after consecutive Redis failures; pass the same one to the ledger and
                the cache of one Redis so that either's failures spare the other the timeouts.
                Default: a breaker of this ledger's own (3 failures, 5 s).

        Raises:
            ConfigurationError: Bad limits, timezone or timeouts, or no ``aclient`` and no URL.
            ImportError: The ``redis`` package is not installed.
        """
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

    def key(self, resource: str, window: QuotaWindow, tenant: str | None = None) -> str:
        """The Redis key of ``resource``'s counter in ``window``: the shared one, or
        ``tenant``'s own (``{prefix}quota@{tenant as hex}:{resource}:{window id}``)."""
        return self._counter((resource, tenant), window.id)

    def _counter(self, counter: Counter, day_id: str) -> str:
        resource, tenant = counter
        if tenant is None:
            return f"{self._prefix}quota:{resource}:{day_id}"
        owner = tenant.encode("utf-8", "surrogatepass").hex()
        return f"{self._prefix}quota@{owner}:{resource}:{day_id}"

    def _days(self) -> tuple[list[Day], list[str | int]]:
        """The candidate days, and the script arguments that pick one (see ``_DAY``)."""
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
        keys = [self._counter(counter, day.id) for counter, _ in counters for day in days]
        args += [n, self._slack_s, *(limit for _, limit in counters)]
        status, pick, *left = await self._redis.acall(lambda c: _CHANGE.arun(c, keys, args))
        if int(status) == -2:
            raise StoreUnavailableError(
                f"the store's clock is more than a day from this replica's ({self.now()}); "
                "check both clocks"
            )
        if int(status) == -1:
            key = self._counter(counters[int(left[0]) - 1][0], days[int(pick) - 1].id)
            raise StoreUnavailableError(
                f"quota counter {key} does not hold a count of units (written by hand or by "
                "another tool?); fix or delete it"
            )
        return int(status) == 1, [int(x) for x in left[1:]]
