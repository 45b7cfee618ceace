"""The daily quota ledger: its results, its window, the fail-closed rule; in memory and in Redis."""

from __future__ import annotations

import contextlib
import contextvars
import logging
import sys
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from types import MappingProxyType
from typing import TYPE_CHECKING, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ragtiller.core.breaker import CircuitBreaker
from ragtiller.errors import ConfigurationError, StoreUnavailableError
from ragtiller.errors import UnknownResourceError as UnknownResourceError  # re-exported
from ragtiller.stores._redis import (
    DEFAULT_CONNECT_TIMEOUT_S,
    DEFAULT_SOCKET_TIMEOUT_S,
    RedisBacked,
    RedisConnection,
    RedisScript,
    Store,
)

if TYPE_CHECKING:
    import redis.asyncio

logger = logging.getLogger("ragtiller.stores")

_NONE: Mapping[str, int] = MappingProxyType({})
_caps: contextvars.ContextVar[tuple[Mapping[str, int], Mapping[str, int]]] = contextvars.ContextVar(
    "ragtiller_spend_caps", default=(_NONE, _NONE)
)
INF = sys.maxsize  # no limit: above any count a store can hold

Counter = tuple[str, str | None]
"""One budget's counter: a resource, and the tenant whose own budget it is (None: shared)."""
Budget = Literal["shared", "tenant"]
"""Which daily budget a figure or a refusal is of: the shared one, or a tenant's own."""
SpendRefusal = Literal["quota", "quota-store-unavailable"]
"""Why a spend was refused: the budget is spent, or the store failed (quotas fail closed)."""


@contextlib.contextmanager
def spend_caps(caps: Mapping[str, int], tenant_caps: Mapping[str, int] = _NONE) -> Iterator[None]:
    """Cap every spend and read inside at ``caps`` (each tenant's own at ``tenant_caps``) in the
    ledger's atomic step: a run policy lowers a limit however many of its turns run at once."""
    token = _caps.set((caps, tenant_caps))
    try:
        yield
    finally:
        _caps.reset(token)


@dataclass(frozen=True)
class SpendResult:
    """One spend: ``remaining`` of ``budget``, the lower of the shared and the tenant's own."""

    allowed: bool
    remaining: int
    reason: SpendRefusal | None = None
    budget: Budget = "shared"


@dataclass(frozen=True)
class QuotaSnapshot:
    """Several budgets in one read: shared, the tenant's own, and whether the store answered."""

    remaining: Mapping[str, int]
    available: bool
    tenant_remaining: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class QuotaWindow:
    """The current window: one calendar day (``id``, ISO) in the ledger's timezone."""

    id: str
    seconds_left: float


@dataclass(frozen=True)
class Day:
    """One calendar day of a ledger's timezone, as a span of POSIX seconds."""

    id: str
    start: float
    end: float


def _utc_now() -> datetime:  # the default clock (tests patch it to skew a replica's)
    return datetime.now(UTC)


class QuotaLedger(Store, ABC):
    """Daily budgets per resource, and optionally each tenant's own beside them: a tenant's
    spend takes from both or neither. A store failure never raises: spends fail closed.

    Example:
        >>> import asyncio
        >>> from ragtiller.stores import MemoryQuotaLedger
        >>> ledger = MemoryQuotaLedger({"chat_gen": 2})
        >>> asyncio.run(ledger.atry_spend("chat_gen"))
        SpendResult(allowed=True, remaining=1, reason=None, budget='shared')
        >>> asyncio.run(ledger.atry_spend("chat_gen", 2))
        SpendResult(allowed=False, remaining=1, reason='quota', budget='shared')
    """

    def __init__(
        self,
        limits: Mapping[str, int],
        *,
        tenant_limits: Mapping[str, int] | None = None,
        timezone: str = "UTC",
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        """``clock`` returns the time (naive: UTC); a limit of 0 disables a resource."""
        for resource, limit in (*limits.items(), *(tenant_limits or {}).items()):
            if not resource or isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
                raise ConfigurationError(
                    f"quota limits must map non-empty resource names to ints >= 0, "
                    f"but got {resource!r}: {limit!r}"
                )
        try:
            self._tz = ZoneInfo(timezone)
        except (ZoneInfoNotFoundError, ValueError) as e:
            raise ConfigurationError(
                f"unknown timezone {timezone!r}; use an IANA name such as 'UTC' or 'Europe/Paris'"
            ) from e
        self.limits: Mapping[str, int] = MappingProxyType(dict(limits))
        self.tenant_limits: Mapping[str, int] = MappingProxyType(dict(tenant_limits or {}))
        self._clock = clock or _utc_now

    @property
    def timezone(self) -> str:
        """IANA name of the timezone whose calendar day is the window."""
        return self._tz.key

    def limit(self, resource: str) -> int:
        """Units of ``resource`` allowed per window (``UnknownResourceError`` lists the known)."""
        try:
            return self.limits[resource]
        except KeyError:
            known = ", ".join(sorted(self.limits)) or "(none)"
            raise UnknownResourceError(
                f"unknown quota resource {resource!r}; known resources: {known}"
            ) from None

    def window(self) -> QuotaWindow:
        """The current window, by the ledger's clock (a Redis ledger counts by the store's)."""
        now = self.now()
        day = self.day(self.today(now))
        return QuotaWindow(day.id, day.end - now.timestamp())

    def now(self) -> datetime:
        now = self._clock()
        return now if now.tzinfo is not None else now.replace(tzinfo=UTC)

    def today(self, now: datetime) -> date:
        return now.astimezone(self._tz).date()

    def day(self, local: date) -> Day:
        start = datetime.combine(local, time(), tzinfo=self._tz)
        end = datetime.combine(local + timedelta(days=1), time(), tzinfo=self._tz)
        return Day(local.isoformat(), start.timestamp(), end.timestamp())

    async def atry_spend(
        self, resource: str, n: int = 1, *, tenant: str | None = None
    ) -> SpendResult:
        """Spend ``n`` units if all fit (caps, and ``tenant``'s own budget); never part of them."""
        counters = self._counters([resource], tenant, n)
        failed = "quota store unavailable; refusing %d %s (fail closed): %s"
        done = await self._change(counters, n, failed, n, resource)
        if done is None:
            return SpendResult(allowed=False, remaining=0, reason="quota-store-unavailable")
        spent, left = done
        lowest = min(left)
        budget: Budget = "tenant" if len(left) == 2 and left[1] == lowest else "shared"
        return SpendResult(spent, lowest, None if spent else "quota", budget)

    async def arefund(self, resource: str, n: int = 1, *, tenant: str | None = None) -> None:
        """Give back up to ``n`` units (to ``tenant``'s own too); a store failure is only logged."""
        counters = self._counters([resource], tenant, n)
        failed = "quota store unavailable; refund of %d %s lost: %s"
        await self._change(counters, -n, failed, n, resource)

    async def aremaining(self, resource: str, *, tenant: str | None = None) -> int:
        """Units ``tenant`` (or anyone) could still spend today; 0 when the store failed."""
        counters = self._counters([resource], tenant)
        failed = "quota store unavailable; reporting 0 %s left: %s"
        done = await self._change(counters, 0, failed, resource)
        return 0 if done is None else min(done[1])

    async def asnapshot(
        self, resources: Iterable[str] | None = None, *, tenant: str | None = None
    ) -> QuotaSnapshot:
        """What is left of ``resources`` (None: all), ``tenant``'s own too, in one round trip."""
        names = tuple(self.limits if resources is None else dict.fromkeys(resources))
        counters = self._counters(names, tenant)
        failed = "quota store unavailable; reporting 0 left of %s: %s"
        done = await self._change(counters, 0, failed, ", ".join(names)) if counters else (True, [])
        left = [0] * len(counters) if done is None else done[1]
        read = list(zip(counters, left, strict=True))
        return QuotaSnapshot(
            {r: n for ((r, owner), _), n in read if owner is None},
            done is not None,
            {r: n for ((r, owner), _), n in read if owner is not None},
        )

    def _counters(
        self, resources: Iterable[str], tenant: str | None, n: int = 1
    ) -> list[tuple[Counter, int]]:
        caps, tenant_caps = _caps.get()
        counters: list[tuple[Counter, int]] = []
        for resource in resources:
            counters.append(((resource, None), min(self.limit(resource), caps.get(resource, INF))))
            own = min(self.tenant_limits.get(resource, INF), tenant_caps.get(resource, INF))
            if tenant is not None and own < INF:
                counters.append(((resource, tenant), own))
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"n must be an int >= 1, but got {n!r}")
        return counters

    async def _change(
        self, counters: Sequence[tuple[Counter, int]], n: int, failed: str, *args: object
    ) -> tuple[bool, list[int]] | None:
        try:
            return await self._achange(counters, n, self.window())
        except StoreUnavailableError as e:
            logger.warning(failed, *args, e)
            return None

    @abstractmethod
    async def _achange(
        self, counters: Sequence[tuple[Counter, int]], n: int, window: QuotaWindow
    ) -> tuple[bool, list[int]]:
        """Atomically: ``n > 0`` spends from every counter or none, ``n < 0`` refunds, 0 reads."""


class MemoryQuotaLedger(QuotaLedger):
    """A quota ledger for one process: one lock, never held across an ``await``."""

    def __init__(
        self,
        limits: Mapping[str, int],
        *,
        tenant_limits: Mapping[str, int] | None = None,
        timezone: str = "UTC",
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        super().__init__(limits, tenant_limits=tenant_limits, timezone=timezone, clock=clock)
        self._lock = threading.Lock()
        self._window_id = ""
        self._spent: dict[Counter, int] = {}

    async def _achange(
        self, counters: Sequence[tuple[Counter, int]], n: int, window: QuotaWindow
    ) -> tuple[bool, list[int]]:
        with self._lock:
            if window.id != self._window_id:
                self._window_id, self._spent = window.id, {}
            used = {counter: self._spent.get(counter, 0) for counter, _ in counters}
            spent = n > 0 and all(used[counter] + n <= limit for counter, limit in counters)
            if spent or n < 0:
                used = {counter: max(0, u + n) for counter, u in used.items()}
                self._spent.update(used)
            return spent, [max(0, limit - used[counter]) for counter, limit in counters]


_CHANGE = RedisScript(
    """
local now, days, pick = tonumber(ARGV[1]), tonumber(ARGV[2]), nil
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) + tonumber(t[2]) / 1000000
end
for i = 1, days do
  if now >= tonumber(ARGV[1 + 2 * i]) and now < tonumber(ARGV[2 + 2 * i]) then pick = i end
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
"""``ARGV``: the time (empty: ``TIME``), the candidate days and their spans, ``n``, the expiry
slack, each counter's limit; ``KEYS``: each counter's days. In the picked day ``n`` spends (every
counter or none), refunds (< 0) or reads (0); replies ``{spent, day, 0, left...}``, ``{-1, day,
c}`` (counter ``c`` is not a count) or ``{-2, 0, 0}`` (no day holds the time)."""


class RedisQuotaLedger(RedisBacked, QuotaLedger):
    """A quota ledger shared by every replica on the same Redis and prefix, counting in the store's
    day (``TIME``; with ``clock=``, that clock's); its keys and failure modes: docs/redis.md."""

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
