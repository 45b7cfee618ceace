"""A client-side rate limit shared by threads: requests per second and items per minute.

Each limit is a schedule, not a bucket: every call reserves the next free slot and sleeps until
it comes, so over any ``T`` seconds at most ``rate * T + 1`` calls start, however many threads
ask. A ``429 Retry-After`` pauses every caller (:meth:`RateLimit.pause`), not only the one
refused, and a caller with a deadline reserves no slot it could not wait for.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

from ragtiller.errors import ConfigurationError, Overloaded


class RateLimit:
    """At most ``requests_per_s`` calls a second and ``items_per_minute`` items (texts) a
    minute; None: no limit.

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
        """Wait for the slot of one call sending ``items`` items; return the wait in seconds.
        A slot more than ``max_wait_s`` away is not reserved: :class:`Overloaded`."""
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
