"""Per-stage deadlines, cut to what the turn has left.

A stage waits for its provider at most ``min(stage deadline, turn time left)``. Past it, the
stage ends as ``error`` with reason ``timeout`` (its own deadline) or ``turn-deadline`` (the
turn's); a stage that starts with no turn time left is skipped with reason ``turn-deadline``.
A call that never got a worker of its provider's bulkhead in that time is skipped with reason
``overloaded``; a provider refused because its calls keep hanging is an ``error``, ``hung``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from ragtiller.policies.schema import RetrievalPolicy

TIMEOUT = "timeout"
TURN_DEADLINE = "turn-deadline"
OVERLOADED = "overloaded"
"""No worker of the provider's bulkhead came free in time: the process, not the provider."""
HUNG = "hung"
"""The provider's calls keep outliving their deadlines; it is refused until a probe answers."""


@dataclass(frozen=True)
class Deadline:
    """How long one stage may wait, and which limit set it."""

    seconds: float
    turn_bound: bool
    """True when the turn's remaining time, not the stage's own deadline, is the limit."""

    @property
    def expired(self) -> bool:
        """The turn has no time left for this stage."""
        return self.seconds <= 0

    @property
    def reason(self) -> str:
        """The stage reason when this deadline passes."""
        return TURN_DEADLINE if self.turn_bound else TIMEOUT

    def message(self) -> str:
        """The stage's error text when this deadline passes."""
        limit = "the turn's deadline" if self.turn_bound else "its deadline"
        return f"TimeoutError: no answer within {self.seconds:.2f}s ({limit})"


def deadline(policy: RetrievalPolicy, stage_s: float, started_at: float) -> Deadline:
    """The deadline of a stage allowed ``stage_s`` seconds, in a turn begun at ``started_at``."""
    left = policy.deadlines.turn_s - (time.perf_counter() - started_at)
    if left < stage_s:
        return Deadline(max(left, 0.0), turn_bound=True)
    return Deadline(stage_s, turn_bound=False)
