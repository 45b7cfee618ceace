"""The daily quota ledger: its result type, its window, and the fail-closed contract."""

from __future__ import annotations

import contextlib
import contextvars
import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from types import MappingProxyType
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ragtiller.errors import ConfigurationError, StoreUnavailableError
from ragtiller.errors import UnknownResourceError as UnknownResourceError  # re-exported

logger = logging.getLogger("ragtiller.stores")

_caps: contextvars.ContextVar[Mapping[str, int]] = contextvars.ContextVar(
    "ragtiller_spend_caps", default=MappingProxyType({})
)


@contextlib.contextmanager
def spend_caps(caps: Mapping[str, int]) -> Iterator[None]:
    """Cap every spend made inside at ``caps`` (resource -> daily limit), below the ledger's
    own limits, in the same atomic step, and every read of what is left: a turn whose policy
    sets a lower daily limit than the ledger's (a run policy) never passes it, however many of
    its turns run at once. The graph sets its turn policy's limits around each node; a provider
    that spends (step-back, the LLM router, the rerank ceiling) needs no argument for it."""
    token = _caps.set(caps)
    try:
        yield
    finally:
        _caps.reset(token)


SpendRefusal = Literal["quota", "quota-store-unavailable"]
"""Why a spend was refused: the budget is spent, or the store failed (quotas fail closed)."""


@dataclass(frozen=True)
class SpendResult:
    """The answer to one :meth:`QuotaLedger.try_spend`.

    Attributes:
        allowed: Whether the units were spent.
        remaining: Budget left in the current window after this call (0 when the store failed).
        reason: None when allowed; ``"quota"`` when the budget is spent;
            ``"quota-store-unavailable"`` when the store failed.
    """

    allowed: bool
    remaining: int
    reason: SpendRefusal | None = None


@dataclass(frozen=True)
class QuotaSnapshot:
    """What is left of several budgets, read in one round trip, and whether the store answered.

    Attributes:
        remaining: Units left in the current window, per resource (0 each when the store failed).
        available: Whether the store answered; False means the quota fails closed this turn
            (reason ``quota-store-unavailable``).
    """

    remaining: Mapping[str, int]
    available: bool


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
    """Daily budget per resource (e.g. ``"chat_gen"``, ``"rerank_calls"``).

    The window is the calendar day in ``timezone``. Spending is atomic and never raises on a store
    failure: it fails closed (``allowed=False``, reason ``"quota-store-unavailable"``) and logs on
    the ``ragtiller.stores`` logger.

    Example:
        >>> import asyncio
        >>> from ragtiller.stores import MemoryQuotaLedger
        >>> ledger = MemoryQuotaLedger({"chat_gen": 2})
        >>> asyncio.run(ledger.atry_spend("chat_gen"))
        SpendResult(allowed=True, remaining=1, reason=None)
        >>> asyncio.run(ledger.atry_spend("chat_gen", 2))
        SpendResult(allowed=False, remaining=1, reason='quota')
    """

    def __init__(
        self,
        limits: Mapping[str, int],
        *,
        timezone: str = "UTC",
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        """Set the budgets.

        Args:
            limits: Units allowed per window, per resource name; 0 disables a resource.
            timezone: IANA name of the timezone whose calendar day is the window.
            clock: Returns the current time; a naive result is read as UTC. Default: the system
                clock.

        Raises:
            ConfigurationError: A limit is not a non-negative int, or the timezone is unknown.
        """
        for resource, limit in limits.items():
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
        self._clock = clock or _utc_now

    @property
    def limits(self) -> Mapping[str, int]:
        """Units allowed per window, per resource (read-only)."""
        return self._limits

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

    async def atry_spend(self, resource: str, n: int = 1) -> SpendResult:
        """Spend ``n`` units if all of them fit in the window's budget (and under any
        :func:`spend_caps` in force); never part of them.

        Raises:
            UnknownResourceError: ``resource`` has no limit.
            ValueError: ``n`` is below 1.
        """
        limit = self._check(resource, n)
        try:
            allowed, remaining = await self._aspend(resource, n, limit, self.window())
        except StoreUnavailableError as e:
            return self._refuse_unavailable(resource, n, e)
        return _result(allowed, remaining)

    async def arefund(self, resource: str, n: int = 1) -> None:
        """Give back ``n`` units spent in the current window (never more than were spent).

        A store failure is logged, not raised: the units stay spent.

        Raises:
            UnknownResourceError: ``resource`` has no limit.
            ValueError: ``n`` is below 1.
        """
        self._check(resource, n)
        try:
            await self._arefund(resource, n, self.window())
        except StoreUnavailableError as e:
            logger.warning("quota store unavailable; refund of %d %s lost: %s", n, resource, e)

    async def aremaining(self, resource: str) -> int:
        """Units of ``resource`` left in the current window (under any :func:`spend_caps` in
        force); 0 when the store failed.

        Raises:
            UnknownResourceError: ``resource`` has no limit.
        """
        limit = self._capped(resource)
        try:
            return max(0, limit - await self._aused(resource, self.window()))
        except StoreUnavailableError as e:
            logger.warning("quota store unavailable; reporting 0 %s left: %s", resource, e)
            return 0

    async def asnapshot(self, resources: Iterable[str] | None = None) -> QuotaSnapshot:
        """Units left of several resources, in one store round trip, for a gate to call once a
        turn; never raises on a store failure.

        Args:
            resources: The resources to read; None: every resource with a limit.

        Raises:
            UnknownResourceError: A resource has no limit.

        Example:
            >>> import asyncio
            >>> from ragtiller.stores import MemoryQuotaLedger
            >>> ledger = MemoryQuotaLedger({"chat_gen": 20, "rerank_calls": 100})
            >>> asyncio.run(ledger.asnapshot())
            QuotaSnapshot(remaining={'chat_gen': 20, 'rerank_calls': 100}, available=True)
        """
        names, limits = self._many(resources)
        try:
            used = await self._aused_many(names, self.window())
        except StoreUnavailableError as e:
            return self._unread(names, e)
        return _reading(names, limits, used)

    def close(self) -> None:  # noqa: B027 - a no-op unless the backend holds connections
        """Release connections this ledger opened (nothing to do in memory)."""

    async def aclose(self) -> None:
        """Release connections this ledger opened, the asyncio ones included."""
        self.close()

    def _check(self, resource: str, n: int) -> int:
        limit = self._capped(resource)
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"n must be an int >= 1, but got {n!r}")
        return limit

    def _capped(self, resource: str) -> int:
        """The limit of ``resource`` that holds here: the ledger's, or a lower
        :func:`spend_caps` cap in force."""
        limit = self.limit(resource)
        cap = _caps.get().get(resource)
        return limit if cap is None else min(limit, cap)

    def _many(self, resources: Iterable[str] | None) -> tuple[tuple[str, ...], list[int]]:
        names = tuple(self._limits if resources is None else dict.fromkeys(resources))
        return names, [self._capped(name) for name in names]

    @staticmethod
    def _unread(names: Sequence[str], error: StoreUnavailableError) -> QuotaSnapshot:
        logger.warning(
            "quota store unavailable; reporting 0 left of %s: %s", ", ".join(names), error
        )
        return QuotaSnapshot(dict.fromkeys(names, 0), available=False)

    @staticmethod
    def _refuse_unavailable(resource: str, n: int, error: StoreUnavailableError) -> SpendResult:
        logger.warning(
            "quota store unavailable; refusing %d %s (fail closed): %s", n, resource, error
        )
        return SpendResult(allowed=False, remaining=0, reason="quota-store-unavailable")

    @abstractmethod
    async def _aspend(
        self, resource: str, n: int, limit: int, window: QuotaWindow
    ) -> tuple[bool, int]:
        """Atomically add ``n`` to the window's use unless it would pass ``limit``.

        Returns:
            Whether it was added, and the units left afterwards.

        Raises:
            StoreUnavailableError: The store failed.
        """

    @abstractmethod
    async def _arefund(self, resource: str, n: int, window: QuotaWindow) -> None:
        """Subtract up to ``n`` from the window's use, not below 0.

        Raises:
            StoreUnavailableError: The store failed.
        """

    @abstractmethod
    async def _aused(self, resource: str, window: QuotaWindow) -> int:
        """Units spent in the window.

        Raises:
            StoreUnavailableError: The store failed.
        """

    async def _aused_many(self, resources: Sequence[str], window: QuotaWindow) -> list[int]:
        """Units spent in the window, per resource, in the order given.

        Backends override it to read them all in one round trip.

        Raises:
            StoreUnavailableError: The store failed.
        """
        return [await self._aused(resource, window) for resource in resources]


def _reading(names: Sequence[str], limits: Sequence[int], used: Sequence[int]) -> QuotaSnapshot:
    left = {n: max(0, limit - u) for n, limit, u in zip(names, limits, used, strict=True)}
    return QuotaSnapshot(left, available=True)


def _result(allowed: bool, remaining: int) -> SpendResult:
    return SpendResult(allowed, max(0, remaining), None if allowed else "quota")
