"""The in-process quota ledger: one lock, one counter per resource, reset when the day turns."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime

from ragtiller.stores._quota import QuotaLedger, QuotaWindow


class MemoryQuotaLedger(QuotaLedger):
    """A quota ledger for one process: thread-safe and asyncio-safe, never unavailable.

    The lock is held only for a dictionary update, never across an ``await``, so ledger calls
    from tasks of several event loops (threads) share it safely. Only the current window is kept.

    Example:
        >>> import asyncio
        >>> ledger = MemoryQuotaLedger({"chat_gen": 20, "rerank_calls": 100})
        >>> asyncio.run(ledger.aremaining("rerank_calls"))
        100
    """

    def __init__(
        self,
        limits: Mapping[str, int],
        *,
        timezone: str = "UTC",
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        """Set the budgets; see :class:`QuotaLedger`."""
        super().__init__(limits, timezone=timezone, clock=clock)
        self._lock = threading.Lock()
        self._window_id = ""
        self._spent: dict[str, int] = {}

    def _counts(self, window: QuotaWindow) -> dict[str, int]:
        """The counters of ``window``; call with the lock held."""
        if window.id != self._window_id:
            self._window_id = window.id
            self._spent = {}
        return self._spent

    async def _aspend(
        self, resource: str, n: int, limit: int, window: QuotaWindow
    ) -> tuple[bool, int]:
        with self._lock:
            counts = self._counts(window)
            used = counts.get(resource, 0)
            if used + n > limit:
                return False, limit - used
            counts[resource] = used + n
            return True, limit - used - n

    async def _arefund(self, resource: str, n: int, window: QuotaWindow) -> None:
        with self._lock:
            counts = self._counts(window)
            counts[resource] = max(0, counts.get(resource, 0) - n)

    async def _aused(self, resource: str, window: QuotaWindow) -> int:
        with self._lock:
            return self._counts(window).get(resource, 0)

    async def _aused_many(self, resources: Sequence[str], window: QuotaWindow) -> list[int]:
        with self._lock:
            counts = self._counts(window)
            return [counts.get(resource, 0) for resource in resources]
