"""The shared quota ledger: one Redis counter per resource and day, spent by a Lua script."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING, Any

from ragtiller.core.breaker import CircuitBreaker
from ragtiller.errors import StoreUnavailableError
from ragtiller.stores._quota import Day, QuotaLedger, QuotaWindow
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

_COUNT = re.compile("[0-9]+")

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

_SPEND = RedisScript(
    _DAY
    + """
local base = 2 + 2 * tonumber(ARGV[2])
if not pick then return {-2, 0, tostring(now)} end
local key = KEYS[pick]
local used = count(redis.call('GET', key))
if not used then return {-1, pick, 0} end
local n, limit = tonumber(ARGV[base + 1]), tonumber(ARGV[base + 2])
if used + n > limit then
  return {0, pick, math.max(0, limit - used)}
end
used = redis.call('INCRBY', key, n)
local expiry = math.ceil(tonumber(ARGV[2 + 2 * pick]) - now) + tonumber(ARGV[base + 3])
redis.call('EXPIRE', key, math.max(1, expiry))
return {1, pick, limit - used}
"""
)
"""Spend ``ARGV[base + 1]`` units of the picked day's counter unless they would pass the limit
``ARGV[base + 2]``; the counter expires ``ARGV[base + 3]`` seconds after its day. Replies
``{1, day, left}`` (spent), ``{0, day, left}`` (refused), ``{-1, day, 0}`` (the counter is not a
count) or ``{-2, 0, now}`` (no candidate day holds the store's time)."""

_REFUND = RedisScript(
    _DAY
    + """
local base = 2 + 2 * tonumber(ARGV[2])
if not pick then return {-2, 0} end
local key = KEYS[pick]
local used = count(redis.call('GET', key))
if not used then return {-1, pick} end
local n = math.min(used, tonumber(ARGV[base + 1]))
if n > 0 then
  redis.call('DECRBY', key, n)
end
return {1, pick}
"""
)
"""Give back up to ``ARGV[base + 1]`` units of the picked day, never below 0."""

_READ = RedisScript(
    _DAY
    + """
if not pick then return {-2} end
local days = tonumber(ARGV[2])
local reply = {pick}
for r = 0, #KEYS / days - 1 do
  reply[#reply + 1] = redis.call('GET', KEYS[r * days + pick])
end
return reply
"""
)
"""The raw counters of the picked day, one per resource (nil when absent): ``KEYS`` holds each
resource's candidate days in turn."""


class RedisQuotaLedger(RedisBacked, QuotaLedger):
    """A quota ledger shared by every process and replica that uses the same Redis and prefix.

    Each resource and window has one counter, ``{prefix}quota:{resource}:{window id}``, changed only
    by Lua scripts (check-and-increment is atomic across processes). A counter expires
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
        SpendResult(allowed=True, remaining=19, reason=None)
        >>> ledger.close()
    """

    def __init__(
        self,
        limits: Mapping[str, int],
        *,
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
        super().__init__(limits, timezone=timezone, clock=clock)
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

    def key(self, resource: str, window: QuotaWindow) -> str:
        """The Redis key of ``resource``'s counter in ``window``."""
        return self._counter(resource, window.id)

    def _counter(self, resource: str, day_id: str) -> str:
        return f"{self._prefix}quota:{resource}:{day_id}"

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

    def _picked(self, status: Any, pick: Any, resource: str, days: list[Day]) -> None:
        """Raise for a script's refusal to count (see ``_SPEND``)."""
        if int(status) == -2:
            raise StoreUnavailableError(
                f"the store's clock is more than a day from this replica's ({self.now()}); "
                "check both clocks"
            )
        if int(status) == -1:
            key = self._counter(resource, days[int(pick) - 1].id)
            raise StoreUnavailableError(
                f"quota counter {key} does not hold a count of units (written by hand or by "
                "another tool?); fix or delete it"
            )

    async def _aspend(
        self, resource: str, n: int, limit: int, window: QuotaWindow
    ) -> tuple[bool, int]:
        days, args = self._days()
        keys = [self._counter(resource, day.id) for day in days]
        args += [n, limit, self._slack_s]
        status, pick, left = await self._redis.acall(lambda c: _SPEND.arun(c, keys, args))
        self._picked(status, pick, resource, days)
        return int(status) == 1, int(left)

    async def _arefund(self, resource: str, n: int, window: QuotaWindow) -> None:
        days, args = self._days()
        keys = [self._counter(resource, day.id) for day in days]
        status, pick = await self._redis.acall(lambda c: _REFUND.arun(c, keys, [*args, n]))
        self._picked(status, pick, resource, days)

    async def _aused(self, resource: str, window: QuotaWindow) -> int:
        return (await self._aused_many([resource], window))[0]

    async def _aused_many(self, resources: Sequence[str], window: QuotaWindow) -> list[int]:
        if not resources:
            return []
        days, args = self._days()
        keys = [self._counter(r, day.id) for r in resources for day in days]
        reply = await self._redis.acall(lambda c: _READ.arun(c, keys, args))
        return self._counts(resources, days, reply)

    def _counts(self, resources: Sequence[str], days: list[Day], reply: list[Any]) -> list[int]:
        """The counters ``_READ`` replied, checked to be counts."""
        pick = reply[0]
        self._picked(pick, 0, "", days)  # -2: no day holds the store's time
        used = []
        for resource, raw in zip(resources, reply[1:], strict=True):
            if raw is None:
                used.append(0)
                continue
            text = raw.decode("latin-1") if isinstance(raw, bytes) else str(raw)
            if not _COUNT.fullmatch(text):
                self._picked(-1, pick, resource, days)
            used.append(int(text))
        return used
