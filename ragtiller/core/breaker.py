"""A circuit breaker: stop calling a store or provider that keeps failing, probe it after a pause.

A frozen or unreachable Redis costs every call its full timeout, and a hung provider costs every
call its deadline and a thread. After a few consecutive failures the breaker opens: calls are
refused at once, so a dead dependency costs a turn about nothing. When the pause is over, one
call goes through as a probe: its success closes the breaker, its failure opens it again for
another pause. The Redis stores (:mod:`ragtiller.stores`) and the provider bulkheads
(:mod:`ragtiller.core.bulkhead`) each put one in front of what they call.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from ragtiller.errors import ConfigurationError

logger = logging.getLogger("ragtiller.stores")

BreakerState = Literal["closed", "open", "half-open"]
"""``closed``: calls go through. ``open``: calls are refused. ``half-open``: the pause is over and
the next call (one at a time) probes the store."""

DEFAULT_FAILURE_THRESHOLD = 3
"""Consecutive failures that open the breaker."""

DEFAULT_RESET_AFTER_S = 5.0
"""How long an open breaker refuses calls before letting a probe through, in seconds."""


@dataclass(frozen=True)
class BreakerSnapshot:
    """The breaker's state at one moment, cheap to take.

    Attributes:
        state: ``closed``, ``open`` or ``half-open``.
        consecutive_failures: Failures since the last success.
        retry_in_s: Time until the next probe is allowed, in seconds (0 unless ``open``).
        available: Whether a call made now would reach the store.
    """

    state: BreakerState
    consecutive_failures: int
    retry_in_s: float
    available: bool


class CircuitBreaker:
    """Counts consecutive failures of one store and refuses calls while it is down.

    Thread-safe, and safe to share between the sync and the async clients of one store, and
    between the stores (quota ledger, cache) that use the same Redis: a failure seen by one spares
    the others the timeout. A call is admitted with :meth:`admit` and must end with exactly one
    of :meth:`succeeded`, :meth:`failed` or :meth:`abandoned`.

    Example:
        >>> now = [0.0]
        >>> breaker = CircuitBreaker(failure_threshold=2, reset_after_s=5, clock=lambda: now[0])
        >>> for _ in range(2):
        ...     breaker.admit() and breaker.failed()
        >>> breaker.admit(), breaker.snapshot().state
        (False, 'open')
        >>> now[0] = 5.0
        >>> breaker.admit(), breaker.admit()  # one probe at a time
        (True, False)
        >>> breaker.succeeded()
        >>> breaker.snapshot().state
        'closed'
    """

    def __init__(
        self,
        *,
        failure_threshold: int = DEFAULT_FAILURE_THRESHOLD,
        reset_after_s: float = DEFAULT_RESET_AFTER_S,
        name: str = "Redis",
        clock: Callable[[], float] = time.monotonic,
        log: logging.Logger = logger,
    ) -> None:
        """Start closed.

        Args:
            failure_threshold: Consecutive failures that open the breaker.
            reset_after_s: Pause before a probe, in seconds.
            name: What the store is called in log messages.
            clock: Returns the current time in seconds (monotonic); injectable for tests.
            log: Where opening and closing are logged (default: the ``ragtiller.stores`` logger).

        Raises:
            ConfigurationError: ``failure_threshold`` is below 1, or ``reset_after_s`` is not a
                finite number > 0.
        """
        if isinstance(failure_threshold, bool) or not isinstance(failure_threshold, int):
            raise ConfigurationError(
                f"failure_threshold must be an int, but got {failure_threshold!r}"
            )
        if failure_threshold < 1:
            raise ConfigurationError(f"failure_threshold must be >= 1, but got {failure_threshold}")
        if not (reset_after_s > 0 and math.isfinite(reset_after_s)):
            raise ConfigurationError(
                f"reset_after_s must be a finite number of seconds > 0, but got {reset_after_s!r}"
            )
        self.failure_threshold = failure_threshold
        self.reset_after_s = float(reset_after_s)
        self.name = name
        self._clock = clock
        self._log = log
        self._lock = threading.Lock()
        self._failures = 0
        self._opened_at: float | None = None
        self._probing = False

    def admit(self) -> bool:
        """Whether a call may go to the store now; in half-open state, True for one probe only."""
        if self._opened_at is None:  # closed: the common case needs no lock
            return True
        with self._lock:
            if self._opened_at is None:
                return True
            if self._probing or self._clock() < self._opened_at + self.reset_after_s:
                return False
            self._probing = True
            return True

    def succeeded(self) -> None:
        """The store answered: close the breaker."""
        if self._failures == 0 and self._opened_at is None:  # nothing to reset, no lock needed
            return
        with self._lock:
            recovered = self._opened_at is not None
            self._failures = 0
            self._opened_at = None
            self._probing = False
        if recovered:
            self._log.warning("%s answered again; circuit closed", self.name)

    def failed(self) -> None:
        """The store failed or timed out: count it, and open the breaker at the threshold."""
        with self._lock:
            self._failures += 1
            reopened = self._opened_at is not None
            opening = reopened or self._failures >= self.failure_threshold
            if opening:
                self._opened_at = self._clock()
            self._probing = False
            failures = self._failures
        if opening:
            self._log.warning(
                "%s failed %d time(s) in a row; circuit open, not called for %.3g s",
                self.name,
                failures,
                self.reset_after_s,
            )

    def abandoned(self) -> None:
        """The call ended with no verdict on the store (cancelled, or a bug in the caller)."""
        with self._lock:
            self._probing = False

    @property
    def available(self) -> bool:
        """Whether a call made now would reach the store (no I/O)."""
        return self.snapshot().available

    def snapshot(self) -> BreakerSnapshot:
        """The current state, failure count and time to the next probe."""
        with self._lock:
            failures, opened_at, probing = self._failures, self._opened_at, self._probing
        if opened_at is None:
            return BreakerSnapshot("closed", failures, 0.0, available=True)
        retry_in_s = max(0.0, opened_at + self.reset_after_s - self._clock())
        if retry_in_s > 0:
            return BreakerSnapshot("open", failures, retry_in_s, available=False)
        return BreakerSnapshot("half-open", failures, 0.0, available=not probing)
