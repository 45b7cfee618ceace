"""``pipeline:step`` events: every stage announces itself, then says done, skipped or error.

Each final event is also returned as a :class:`~ragtiller.types.StageRecord` so the run
manifest holds the same facts whether or not the caller streamed ``custom`` events.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from langgraph.config import get_stream_writer

from ragtiller.types import StageName, StageRecord, StageStatus

EVENT_TYPE = "pipeline:step"


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
    if "error" in record:
        event["error"] = record["error"]
    return event


def emit(record: StageRecord) -> StageRecord:
    """Send a final record as a ``pipeline:step`` event and return it."""
    _writer()(_event(record))
    return record


def skipped(step: StageName, reason: str, **detail: Any) -> StageRecord:
    """Announce a stage that did not run, with the reason, and return its record."""
    return emit(StageRecord(step=step, status="skipped", reason=reason, ms=0.0, detail=detail))


class Stage:
    """Times one stage: announces ``active`` on creation, then one final status.

    Example:
        >>> stage = Stage("embed")
        >>> record = stage.done(dim=384)
        >>> record["status"]
        'done'
    """

    def __init__(self, step: StageName, **detail: Any) -> None:
        self.step: StageName = step
        self._write = _writer()
        self._start = time.perf_counter()
        self._write({"type": EVENT_TYPE, "step": step, "status": "active", "detail": detail})

    def _finish(
        self, status: StageStatus, reason: str | None, detail: dict[str, Any], error: str | None
    ) -> StageRecord:
        record = StageRecord(
            step=self.step,
            status=status,
            reason=reason,
            ms=(time.perf_counter() - self._start) * 1000.0,
            detail=detail,
        )
        if error is not None:
            record["error"] = error
        self._write(_event(record))
        return record

    def done(self, reason: str | None = None, **detail: Any) -> StageRecord:
        """The stage ran; ``reason`` explains a notable outcome (e.g. ``from-cache``)."""
        return self._finish("done", reason, detail, None)

    def skip(self, reason: str, **detail: Any) -> StageRecord:
        """The stage started but decided not to do its work (e.g. quota spent)."""
        return self._finish("skipped", reason, detail, None)

    def error(
        self, error: BaseException | str, reason: str | None = None, **detail: Any
    ) -> StageRecord:
        """The stage failed; the turn goes on. ``error`` is shown as ``Type: message``."""
        text = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
        return self._finish("error", reason, detail, text[:500])
