"""The daily quota ledger: its result type, its window, and the fail-closed contract."""

from __future__ import annotations

import contextlib
import contextvars
import logging
import sys
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from types import MappingProxyType
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ragtiller.errors import ConfigurationError, StoreUnavailableError
from ragtiller.errors import UnknownResourceError as UnknownResourceError  # re-exported

logger = logging.getLogger("ragtiller.stores")

_NONE: Mapping[str, int] = MappingProxyType({})
_caps: contextvars.ContextVar[tuple[Mapping[str, int], Mapping[str, int]]] = contextvars.ContextVar(
    "ragtiller_spend_caps", default=(_NONE, _NONE)
)

INF = sys.maxsize
"""No limit: above any count a store can hold."""

Counter = tuple[str, str | None]
"""One budget's counter: a resource, and the tenant whose own budget it is (None: shared)."""

Budget = Literal["shared", "tenant"]
"""Which daily budget a figure or a refusal is of: the shared one, or a tenant's own."""


@contextlib.contextmanager
def spend_caps(caps: Mapping[str, int], tenant_caps: Mapping[str, int] = _NONE) -> Iterator[None]:
    """Cap every spend made inside at ``caps`` (resource -> daily limit), below the ledger's
    own limits, in the same atomic step, and every read of what is left: a turn whose policy
    sets a lower daily limit than the ledger's (a run policy) never passes it, however many of
    its turns run at once. ``tenant_caps`` caps (or sets, where the ledger has none) each
    tenant's own daily budget the same way. The graph sets its turn policy's limits around each
    node; a provider that spends (step-back, the LLM router, the rerank ceiling) needs no
    argument for it."""
    token = _caps.set((caps, tenant_caps))
    try:
        yield
    finally:
        _caps.reset(token)


SpendRefusal = Literal["quota", "quota-store-unavailable"]
"""Why a spend was refused: the budget is spent, or the store failed (quotas fail closed)."""


@dataclass(frozen=True)
class SpendResult:
    """The answer to one :meth:`QuotaLedger.atry_spend`.

    Attributes:
        allowed: Whether the units were spent.
        remaining: Budget left in the current window after this call (0 when the store failed):
            of ``budget``, the lower of the shared budget and the tenant's own.
        reason: None when allowed; ``"quota"`` when the budget is spent;
            ``"quota-store-unavailable"`` when the store failed.
        budget: ``"tenant"`` when ``remaining`` (and a ``quota`` refusal) is the tenant's own
            budget: a spend for a tenant under a per-tenant limit, whose own budget is the
            lower one; else ``"shared"``.
    """

    allowed: bool
    remaining: int
    reason: SpendRefusal | None = None
    budget: Budget = "shared"


@dataclass(frozen=True)
class QuotaSnapshot:
    """What is left of several budgets, read in one round trip, and whether the store answered.

    Attributes:
        remaining: Units left in the current window of the shared budget, per resource (0
            each when the store failed).
        available: Whether the store answered; False means the quota fails closed this turn
            (reason ``quota-store-unavailable``).
        tenant_remaining: Units left of the tenant's own budget, per resource with a per-tenant
            limit (read for a tenant only): what one tenant's activity never moves for another.
    """

    remaining: Mapping[str, int]
    available: bool
    tenant_remaining: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class QuotaWindow:
    """The current budget window: one calendar day in the ledger's timezone.

    Attributes:
        id: The local date, ISO format (``2026-06-16``).
        seconds_left: Time until the next local midnight, in seconds.
    """

    id: str
    seconds_left: float


@dataclass(frozen=True)
class Day:
    """One calendar day of a ledger's timezone, as a span of POSIX time.

    Attributes:
        id: The local date, ISO format; names the day's counters.
        start: Its first second (local midnight), POSIX seconds.
        end: The next local midnight, POSIX seconds.
    """

    id: str
    start: float
    end: float


def _utc_now() -> datetime:
    return datetime.now(UTC)


class QuotaLedger(ABC):
    """Daily budget per resource (e.g. ``"chat_gen"``, ``"rerank_calls"``), and optionally
    each tenant's own daily budget beside it (``tenant_limits``).

    The window is the calendar day in ``timezone``. Spending is atomic and never raises on a store
    failure: it fails closed (``allowed=False``, reason ``"quota-store-unavailable"``) and logs on
    the ``ragtiller.stores`` logger. A spend for a tenant under a per-tenant limit takes its
    units from the shared budget and from the tenant's own in one atomic step, or from neither.

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
        """Set the budgets.

        Args:
            limits: Units allowed per window, per resource name; 0 disables a resource.
            tenant_limits: Units each tenant may spend per window, per resource (beside the
                shared limit); a resource not named has no per-tenant limit.
            timezone: IANA name of the timezone whose calendar day is the window.
            clock: Returns the current time; a naive result is read as UTC. Default: the system
                clock.

        Raises:
            ConfigurationError: A limit is not a non-negative int, or the timezone is unknown.
        """
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
        self._limits = MappingProxyType(dict(limits))
        self._tenant_limits = MappingProxyType(dict(tenant_limits or {}))
        self._clock = clock or _utc_now

    @property
    def limits(self) -> Mapping[str, int]:
        """Units allowed per window, per resource (read-only)."""
        return self._limits

    @property
    def tenant_limits(self) -> Mapping[str, int]:
        """Units each tenant may spend per window, per resource with a per-tenant limit."""
        return self._tenant_limits

    @property
    def timezone(self) -> str:
        """IANA name of the timezone whose calendar day is the window."""
        return self._tz.key

    @property
    def available(self) -> bool:
        """Whether a call made now would reach the store; no I/O (always True in memory)."""
        return True

    def limit(self, resource: str) -> int:
        """Units of ``resource`` allowed per window.

        Raises:
            UnknownResourceError: ``resource`` has no limit; the message lists the known ones.
        """
        try:
            return self._limits[resource]
        except KeyError:
            known = ", ".join(sorted(self._limits)) or "(none)"
            raise UnknownResourceError(
                f"unknown quota resource {resource!r}; known resources: {known}"
            ) from None

    def window(self) -> QuotaWindow:
        """The current window, by the ledger's clock (a Redis ledger counts by the store's)."""
        now = self.now()
        day = self.day(self.today(now))
        return QuotaWindow(day.id, day.end - now.timestamp())

    def now(self) -> datetime:
        """The ledger's clock, timezone-aware."""
        now = self._clock()
        return now if now.tzinfo is not None else now.replace(tzinfo=UTC)

    def today(self, now: datetime) -> date:
        """The calendar date of ``now`` in the ledger's timezone."""
        return now.astimezone(self._tz).date()

    def day(self, local: date) -> Day:
        """The window of calendar day ``local`` in the ledger's timezone."""
        start = datetime.combine(local, time(), tzinfo=self._tz)
        end = datetime.combine(local + timedelta(days=1), time(), tzinfo=self._tz)
        return Day(local.isoformat(), start.timestamp(), end.timestamp())

    async def atry_spend(
        self, resource: str, n: int = 1, *, tenant: str | None = None
    ) -> SpendResult:
        """Spend ``n`` units if all of them fit in the window's budget (and under any
        :func:`spend_caps` in force); never part of them. For a ``tenant`` under a per-tenant
        limit, they must fit in its own budget too, and are spent from both or neither.

        Raises:
            UnknownResourceError: ``resource`` has no limit.
            ValueError: ``n`` is below 1.
        """
        counters = self._counters([resource], tenant)
        _check_n(n)
        try:
            spent, left = await self._achange(counters, n, self.window())
        except StoreUnavailableError as e:
            logger.warning(
                "quota store unavailable; refusing %d %s (fail closed): %s", n, resource, e
            )
            return SpendResult(allowed=False, remaining=0, reason="quota-store-unavailable")
        lowest = min(left)
        budget: Budget = "tenant" if len(left) == 2 and left[1] == lowest else "shared"
        return SpendResult(spent, lowest, None if spent else "quota", budget)

    async def arefund(self, resource: str, n: int = 1, *, tenant: str | None = None) -> None:
        """Give back ``n`` units spent in the current window (never more than were spent), to
        the shared budget and, for a ``tenant`` under a per-tenant limit, to its own.

        A store failure is logged, not raised: the units stay spent.

        Raises:
            UnknownResourceError: ``resource`` has no limit.
            ValueError: ``n`` is below 1.
        """
        counters = self._counters([resource], tenant)
        _check_n(n)
        try:
            await self._achange(counters, -n, self.window())
        except StoreUnavailableError as e:
            logger.warning("quota store unavailable; refund of %d %s lost: %s", n, resource, e)

    async def aremaining(self, resource: str, *, tenant: str | None = None) -> int:
        """Units of ``resource`` left in the current window (under any :func:`spend_caps` in
        force), for ``tenant``: the lower of the shared budget and its own; 0 when the store
        failed.

        Raises:
            UnknownResourceError: ``resource`` has no limit.
        """
        counters = self._counters([resource], tenant)
        try:
            return min((await self._achange(counters, 0, self.window()))[1])
        except StoreUnavailableError as e:
            logger.warning("quota store unavailable; reporting 0 %s left: %s", resource, e)
            return 0

    async def asnapshot(
        self, resources: Iterable[str] | None = None, *, tenant: str | None = None
    ) -> QuotaSnapshot:
        """Units left of several resources, in one store round trip, for a gate to call once a
        turn; never raises on a store failure. With a ``tenant``, its own budgets too.

        Args:
            resources: The resources to read; None: every resource with a limit.
            tenant: Whose own budgets to read (``tenant_remaining``); None: the shared only.

        Raises:
            UnknownResourceError: A resource has no limit.

        Example:
            >>> import asyncio
            >>> from ragtiller.stores import MemoryQuotaLedger
            >>> ledger = MemoryQuotaLedger({"chat_gen": 20, "rerank_calls": 100})
            >>> asyncio.run(ledger.asnapshot()).remaining
            {'chat_gen': 20, 'rerank_calls': 100}
        """
        names = tuple(self._limits if resources is None else dict.fromkeys(resources))
        counters = self._counters(names, tenant)
        try:
            left = (await self._achange(counters, 0, self.window()))[1] if counters else []
        except StoreUnavailableError as e:
            logger.warning(
                "quota store unavailable; reporting 0 left of %s: %s", ", ".join(names), e
            )
            left, available = [0] * len(counters), False
        else:
            available = True
        shared = {r: n for ((r, owner), _), n in zip(counters, left, strict=True) if owner is None}
        own = {r: n for ((r, owner), _), n in zip(counters, left, strict=True) if owner is not None}
        return QuotaSnapshot(shared, available, own)

    def close(self) -> None:  # noqa: B027 - a no-op unless the backend holds connections
        """Release connections this ledger opened (nothing to do in memory)."""

    async def aclose(self) -> None:
        """Release connections this ledger opened, the asyncio ones included."""
        self.close()

    def _counters(self, resources: Iterable[str], tenant: str | None) -> list[tuple[Counter, int]]:
        """The counters a call on ``resources`` for ``tenant`` reads or changes, each with the
        limit that holds there: the ledger's, or a lower :func:`spend_caps` cap in force. A
        resource's shared counter comes first, then the tenant's own when a per-tenant limit
        (the ledger's or a cap) applies to it."""
        caps, tenant_caps = _caps.get()
        counters: list[tuple[Counter, int]] = []
        for resource in resources:
            counters.append(((resource, None), min(self.limit(resource), caps.get(resource, INF))))
            own = min(self._tenant_limits.get(resource, INF), tenant_caps.get(resource, INF))
            if tenant is not None and own < INF:
                counters.append(((resource, tenant), own))
        return counters

    @abstractmethod
    async def _achange(
        self, counters: Sequence[tuple[Counter, int]], n: int, window: QuotaWindow
    ) -> tuple[bool, list[int]]:
        """In one atomic step: with ``n > 0``, add ``n`` to every counter's use in the window
        unless one would pass its limit (then to none); with ``n < 0``, take ``-n`` from each,
        never below 0; with ``n == 0``, only read them.

        Returns:
            Whether the units were spent, and the units left of each counter afterwards
            (never below 0).

        Raises:
            StoreUnavailableError: The store failed.
        """


def _check_n(n: int) -> None:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be an int >= 1, but got {n!r}")
