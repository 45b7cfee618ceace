"""Stage records (each with its own labels), their ``pipeline:step`` events, stage deadlines."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from langgraph.config import get_stream_writer

from ragtiller.core.redact import redact
from ragtiller.core.tiers import StageName, StageRecord, StageStatus
from ragtiller.policies.schema import RetrievalPolicy

EVENT_TYPE = "pipeline:step"
TIMEOUT = "timeout"
TURN_DEADLINE = "turn-deadline"
OVERLOADED = "overloaded"  # no bulkhead worker came free in time: the process, not the provider
HUNG = "hung"  # the provider's calls keep outliving their deadlines, refused until a probe answers

# skip reasons that mean "the turn was worse because something ran out", not "not needed"
COULD_NOT_AFFORD = frozenset(
    {
        "quota",
        "budget",
        "no-credentials",
        "quota-store-unavailable",
        "latency",
        TURN_DEADLINE,
        OVERLOADED,
    }
)


@dataclass(frozen=True)
class Deadline:
    """How long a stage may wait; ``turn_bound``: the turn's time left is the limit."""

    seconds: float
    turn_bound: bool

    @property
    def expired(self) -> bool:
        return self.seconds <= 0

    @property
    def reason(self) -> str:
        return TURN_DEADLINE if self.turn_bound else TIMEOUT

    def message(self) -> str:
        limit = "the turn's deadline" if self.turn_bound else "its deadline"
        return f"TimeoutError: no answer within {self.seconds:.2f}s ({limit})"


def deadline(policy: RetrievalPolicy, stage_s: float, started_at: float) -> Deadline:
    left = policy.deadlines.turn_s - (time.perf_counter() - started_at)
    if left < stage_s:
        return Deadline(max(left, 0.0), turn_bound=True)
    return Deadline(stage_s, turn_bound=False)


def _writer() -> Callable[[Any], None]:
    try:
        return get_stream_writer()
    except RuntimeError:  # called outside a graph run (e.g. a node function called directly)
        return lambda _event: None


def final_event(record: StageRecord) -> dict[str, Any]:
    event: dict[str, Any] = {
        "type": EVENT_TYPE,
        "step": record["step"],
        "status": record["status"],
        "detail": {**record["detail"], "reason": record["reason"], "ms": round(record["ms"], 3)},
    }
    if record["labels"]:
        event["labels"] = record["labels"]
    if "error" in record:
        event["error"] = record["error"]
    return event


def quota_label(reason: str, budget: object) -> str:
    """``quota (tenant daily)`` when what ran out is the tenant's own daily budget."""
    return f"{reason} (tenant daily)" if budget == "tenant" else reason


def record(
    step: StageName,
    status: StageStatus,
    reason: str | None,
    *,
    ms: float = 0.0,
    detail: dict[str, Any] | None = None,
    labels: Iterable[str] = (),
    error: str | None = None,
) -> StageRecord:
    details = detail or {}
    tier = details.get("tier")
    name = f"{step} ({tier})" if tier else step
    own: list[str] = []
    if status == "skipped" and reason in COULD_NOT_AFFORD:
        own = [f"{name} skipped: {quota_label(reason, details.get('quota_budget'))}"]
    elif status == "error":
        own = [f"{name} failed: {reason or 'error'}"]
    own.extend(labels)
    made = StageRecord(step=step, status=status, reason=reason, ms=ms, detail=details, labels=own)
    if error is not None:
        made["error"] = error
    return made


def skipped(
    step: StageName, reason: str, *, labels: Iterable[str] = (), **detail: Any
) -> StageRecord:
    final = record(step, "skipped", reason, detail=detail, labels=labels)
    _writer()(final_event(final))
    return final


class Stage:
    """Times one stage: announces ``active`` on creation, then one final status."""

    def __init__(self, step: StageName, **detail: Any) -> None:
        self.step: StageName = step
        self._write = _writer()
        self._start = time.perf_counter()
        self._write({"type": EVENT_TYPE, "step": step, "status": "active", "detail": detail})

    def _finish(
        self,
        status: StageStatus,
        reason: str | None,
        detail: dict[str, Any],
        labels: Iterable[str],
        error: str | None,
    ) -> StageRecord:
        ms = (time.perf_counter() - self._start) * 1000.0
        final = record(self.step, status, reason, ms=ms, detail=detail, labels=labels, error=error)
        self._write(final_event(final))
        return final

    def done(
        self, reason: str | None = None, *, labels: Iterable[str] = (), **detail: Any
    ) -> StageRecord:
        return self._finish("done", reason, detail, labels, None)

    def skip(self, reason: str, *, labels: Iterable[str] = (), **detail: Any) -> StageRecord:
        return self._finish("skipped", reason, detail, labels, None)

    def error(
        self,
        error: BaseException | str,
        reason: str | None = None,
        *,
        labels: Iterable[str] = (),
        **detail: Any,
    ) -> StageRecord:
        """The turn goes on; credentials are redacted from the message."""
        text = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
        return self._finish("error", reason, detail, labels, redact(text)[:500])
