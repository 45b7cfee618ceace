"""``pipeline:step`` events: every stage announces itself, then says done, skipped or error.

Each final event is also returned as a :class:`~ragtiller.core.tiers.StageRecord`, so the run
manifest holds the same facts whether or not the caller streamed ``custom`` events. A record
carries its own degradation labels: the stage that knows why a turn got worse says so, and
``assemble`` only collects what the records say.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from langgraph.config import get_stream_writer

from ragtiller.core.redact import redact
from ragtiller.core.tiers import StageName, StageRecord, StageStatus

EVENT_TYPE = "pipeline:step"

COULD_NOT_AFFORD = frozenset(
    {
        "quota",
        "budget",
        "no-credentials",
        "quota-store-unavailable",
        "latency",
        "turn-deadline",
        "overloaded",
    }
)
"""Skip reasons that mean "the turn was worse because something ran out", not "not needed"."""


def _writer() -> Callable[[Any], None]:
    try:
        return get_stream_writer()
    except RuntimeError:  # called outside a graph run (e.g. a node function called directly)
        return lambda _event: None


def _event(record: StageRecord) -> dict[str, Any]:
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


def final_event(record: StageRecord) -> dict[str, Any]:
    """The ``pipeline:step`` event of a final record (also sent to LangChain callbacks)."""
    return _event(record)


def quota_label(reason: str, budget: object) -> str:
    """A skip reason as its label says it: ``quota (tenant daily)`` when what ran out is the
    tenant's own daily budget (``budget == "tenant"``), else the reason itself."""
    return f"{reason} (tenant daily)" if budget == "tenant" else reason


def _labels(
    step: StageName, status: StageStatus, reason: str | None, detail: dict[str, Any]
) -> list[str]:
    """The label a skip for want of something, or an error, earns by itself."""
    tier = detail.get("tier")
    name = f"{step} ({tier})" if tier else step
    if status == "skipped" and reason in COULD_NOT_AFFORD:
        return [f"{name} skipped: {quota_label(reason, detail.get('quota_budget'))}"]
    if status == "error":
        return [f"{name} failed: {reason or 'error'}"]
    return []


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
    """A final record, labelled: its own skip or error label first, then ``labels``."""
    details = detail or {}
    made = StageRecord(
        step=step,
        status=status,
        reason=reason,
        ms=ms,
        detail=details,
        labels=[*_labels(step, status, reason, details), *labels],
    )
    if error is not None:
        made["error"] = error
    return made


def emit(final: StageRecord) -> StageRecord:
    """Send a final record as a ``pipeline:step`` event and return it."""
    _writer()(_event(final))
    return final


def skipped(
    step: StageName, reason: str, *, labels: Iterable[str] = (), **detail: Any
) -> StageRecord:
    """Announce a stage that did not run, with the reason, and return its record."""
    return emit(record(step, "skipped", reason, detail=detail, labels=labels))


class Stage:
    """Times one stage: announces ``active`` on creation, then one final status.

    Example:
        >>> stage = Stage("embed")
        >>> final = stage.done(dim=384)
        >>> final["status"], final["labels"]
        ('done', [])
        >>> Stage("rerank").skip("budget")["labels"]
        ['rerank skipped: budget']
    """

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
        self._write(_event(final))
        return final

    def done(
        self, reason: str | None = None, *, labels: Iterable[str] = (), **detail: Any
    ) -> StageRecord:
        """The stage ran; ``reason`` explains a notable outcome (e.g. ``from-cache``)."""
        return self._finish("done", reason, detail, labels, None)

    def skip(self, reason: str, *, labels: Iterable[str] = (), **detail: Any) -> StageRecord:
        """The stage started but decided not to do its work (e.g. quota spent)."""
        return self._finish("skipped", reason, detail, labels, None)

    def error(
        self,
        error: BaseException | str,
        reason: str | None = None,
        *,
        labels: Iterable[str] = (),
        **detail: Any,
    ) -> StageRecord:
        """The stage failed; the turn goes on. ``error`` is shown as ``Type: message``, with
        credentials redacted (providers put keys in their messages)."""
        text = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
        return self._finish("error", reason, detail, labels, redact(text)[:500])
