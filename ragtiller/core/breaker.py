"""A circuit breaker: a dependency that keeps failing (a frozen Redis, a hung provider) is
refused at once instead of costing every call its timeout, and probed by one call after a pause."""

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

BreakerState = Literal["closed", "open", "half-open"]  # half-open: the next call probes


@dataclass(frozen=True)
class BreakerSnapshot:
    """The breaker's state at one moment; ``retry_in_s`` is 0 unless ``open``."""

    state: BreakerState
    consecutive_failures: int
    retry_in_s: float
    available: bool


class CircuitBreaker:
    """Thread-safe and shared by every client of one store, so a failure one sees spares the
    others the timeout; a call :meth:`admit` let in ends in one of succeeded, failed, abandoned."""

    def __init__(
        self,
        *,
        failure_threshold: int = 3,
        reset_after_s: float = 5.0,
        name: str = "Redis",
        clock: Callable[[], float] = time.monotonic,
        log: logging.Logger = logger,
    ) -> None:
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
        return self.snapshot().available

    def snapshot(self) -> BreakerSnapshot:
        with self._lock:
            failures, opened_at, probing = self._failures, self._opened_at, self._probing
        if opened_at is None:
            return BreakerSnapshot("closed", failures, 0.0, available=True)
        retry_in_s = max(0.0, opened_at + self.reset_after_s - self._clock())
        if retry_in_s > 0:
            return BreakerSnapshot("open", failures, retry_in_s, available=False)
        return BreakerSnapshot("half-open", failures, 0.0, available=not probing)
