"""A rolling window of the ceiling's added latency, and its 95th percentile."""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable

from ragtiller.errors import ConfigurationError


class LatencyWindow:
    """The latest ``size`` samples, each forgotten after ``max_age_s`` seconds.

    The age limit lets a ceiling that was switched off for being slow be tried again once its
    slow samples have aged out; if it is still slow, the window fills and trips again.

    Args:
        size: Samples kept at most (the latest ones).
        max_age_s: Samples older than this are dropped, in seconds.
        min_samples: :meth:`p95` is ``None`` below this many samples (one slow cold start
            must not switch the ceiling off).
        clock: Monotonic time in seconds; injectable for tests.

    Raises:
        ConfigurationError: A size, age or sample count that is not positive.

    Example:
        >>> window = LatencyWindow(min_samples=2)
        >>> for ms in (100.0, 300.0, 200.0):
        ...     window.add(ms)
        >>> window.p95()
        300.0
    """

    def __init__(
        self,
        size: int = 20,
        *,
        max_age_s: float = 300.0,
        min_samples: int = 5,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if size < 1 or min_samples < 1 or not max_age_s > 0:
            raise ConfigurationError(
                "size, min_samples and max_age_s must be > 0, "
                f"but got {size}, {min_samples}, {max_age_s}"
            )
        self.max_age_s = max_age_s
        self.min_samples = min_samples
        self._clock = clock
        self._samples: deque[tuple[float, float]] = deque(maxlen=size)

    def add(self, ms: float) -> None:
        """Record one call's added latency, in milliseconds."""
        self._samples.append((self._clock(), ms))

    def p95(self) -> float | None:
        """The nearest-rank 95th percentile of the live samples, in milliseconds.

        Returns:
            ``None`` while fewer than ``min_samples`` samples are live.
        """
        cutoff = self._clock() - self.max_age_s
        while self._samples and self._samples[0][0] < cutoff:
            self._samples.popleft()
        if len(self._samples) < self.min_samples:
            return None
        values = sorted(ms for _, ms in self._samples)
        return values[math.ceil(0.95 * len(values)) - 1]
