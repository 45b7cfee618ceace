"""The in-process quota ledger: one lock, one counter per budget, reset when the day turns."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime

from ragtiller.stores._quota import Counter, QuotaLedger, QuotaWindow


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
        tenant_limits: Mapping[str, int] | None = None,
        timezone: str = "UTC",
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        """Set the budgets; see :class:`QuotaLedger`."""
        super().__init__(limits, tenant_limits=tenant_limits, timezone=timezone, clock=clock)
        self._lock = threading.Lock()
        self._window_id = ""
        self._spent: dict[Counter, int] = {}

    def _counts(self, window: QuotaWindow) -> dict[Counter, int]:
        """The counters of ``window``; call with the lock held."""
        if window.id != self._window_id:
            self._window_id = window.id
            self._spent = {}
        return self._spent

    async def _achange(
        self, counters: Sequence[tuple[Counter, int]], n: int, window: QuotaWindow
    ) -> tuple[bool, list[int]]:
        with self._lock:
            counts = self._counts(window)
            used = {counter: counts.get(counter, 0) for counter, _ in counters}
            spent = n > 0 and all(used[counter] + n <= limit for counter, limit in counters)
            if spent or n < 0:
                used = {counter: max(0, u + n) for counter, u in used.items()}
                counts.update(used)
            return spent, [max(0, limit - used[counter]) for counter, limit in counters]
