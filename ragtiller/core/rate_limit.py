"""A client-side rate limit shared by threads: requests per second and items per minute.

Each limit is a schedule, not a bucket: every call reserves the next free slot (its cost spaced
at the limit's rate after the previous one) and sleeps until it comes, so over any window of
``T`` seconds at most ``rate * T + 1`` calls start, however many threads ask. A service that
answers ``429 Retry-After: s`` pauses every caller for ``s`` seconds (:meth:`RateLimit.pause`),
not only the one it refused. A caller with a deadline asks for no slot it could not wait for.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

from ragtiller.errors import ConfigurationError, Overloaded


class RateLimit:
    """At most ``requests_per_s`` calls a second and ``items_per_minute`` items a minute.

    Args:
        requests_per_s: Calls started per second; None: no limit.
        items_per_minute: Items (texts) sent per minute; None: no limit.
        clock: Monotonic seconds (tests may pass their own).
        sleep: Waits that many seconds.

    Raises:
        ConfigurationError: A limit is not positive.

    Example:
        >>> limit = RateLimit(requests_per_s=100.0)
        >>> limit.acquire(items=8) >= 0.0
        True
    """

    def __init__(
        self,
        requests_per_s: float | None = None,
        items_per_minute: float | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        for name, value in (
            ("requests_per_s", requests_per_s),
            ("items_per_minute", items_per_minute),
        ):
            if value is not None and not value > 0:
                raise ConfigurationError(f"{name} must be > 0, but got {value}")
        self.requests_per_s = requests_per_s
        self.items_per_minute = items_per_minute
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._next_request = self._next_items = self._paused_until = clock()

    def acquire(self, items: int = 1, max_wait_s: float = math.inf) -> float:
        """Wait for the slot of one call sending ``items`` items.

        Args:
            items: Items the call sends.
            max_wait_s: The longest wait the caller can afford (its deadline).

        Returns:
            How long the call waited, in seconds.

        Raises:
            Overloaded: The slot is more than ``max_wait_s`` away; none is reserved, so a call
                that could not wait for it spends none of the budget.
        """
        with self._lock:
            now = self._clock()
            start = max(now, self._paused_until)
            next_request, next_items = self._next_request, self._next_items
            if self.requests_per_s is not None:
                start = max(start, self._next_request)
                next_request = start + 1.0 / self.requests_per_s
            if self.items_per_minute is not None:
                start = max(start, self._next_items)
                next_items = start + items * 60.0 / self.items_per_minute
            if start - now > max_wait_s:
                raise Overloaded(
                    f"rate limit: the next call may start in {start - now:.2f} s, "
                    f"past the caller's deadline ({max(0.0, max_wait_s):.2f} s)"
                )
            self._next_request, self._next_items = next_request, next_items
        wait = start - now
        if wait > 0:
            self._sleep(wait)
        return max(0.0, wait)

    def pause(self, seconds: float) -> None:
        """Start no call for ``seconds`` from now (a ``Retry-After`` answer)."""
        with self._lock:
            self._paused_until = max(self._paused_until, self._clock() + seconds)
