"""Retry with exponential backoff and full jitter, shared by ingest and the embed node."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently to retry a failing call (delays in seconds)."""

    attempts: int = 3  # the first try included
    base_delay_s: float = 0.2  # delay cap before the second try; doubles each retry
    max_delay_s: float = 5.0

    def delay(self, retry: int, rng: random.Random | None = None) -> float:
        """Full-jitter delay before retry number ``retry`` (1-based), in seconds."""
        cap = min(self.max_delay_s, self.base_delay_s * (2 ** (retry - 1)))
        return (rng or random).uniform(0.0, cap)


def retry_call(
    fn: Callable[[], T],
    policy: RetryPolicy = RetryPolicy(),
    *,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[T, int]:
    """Call ``fn`` until it succeeds or the attempts run out (then the last error is raised);
    return the result and the number of calls made."""
    for attempt in range(1, policy.attempts + 1):
        try:
            return fn(), attempt
        except Exception:
            if attempt == policy.attempts:
                raise
            sleep(policy.delay(attempt))
    raise AssertionError("unreachable")  # pragma: no cover


async def aretry_call(
    fn: Callable[[], Awaitable[T]],
    policy: RetryPolicy = RetryPolicy(),
    *,
    final: tuple[type[BaseException], ...] = (),
) -> tuple[T, int]:
    """Async twin of :func:`retry_call`; errors of a ``final`` type are raised at once (a
    deadline that passed, a provider refused: trying again cannot help)."""
    for attempt in range(1, policy.attempts + 1):
        try:
            return await fn(), attempt
        except final:
            raise
        except Exception:
            if attempt == policy.attempts:
                raise
            await asyncio.sleep(policy.delay(attempt))
    raise AssertionError("unreachable")  # pragma: no cover
