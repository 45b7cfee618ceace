"""One progress bar over a whole ingest: read -> chunk -> embed -> index -> save."""

from __future__ import annotations

from tqdm import tqdm

STAGES = ("read", "chunk", "embed", "index", "save")
STORE_STAGES = ("read", "chunk", "write")  # into a remote store: it embeds inside ``write``


class IngestProgress:
    """One tqdm bar that every stage reuses (``embed 3/5``), its postfix the counts of the stages
    done, so the finished bar sums up the run; ``enabled=False`` draws nothing.

    Example:
        >>> with IngestProgress(enabled=False) as bar:
        ...     bar.stage("read", 2)
        ...     bar.advance(2)
        >>> bar.done
        {'read': 2}
    """

    def __init__(self, *, enabled: bool = True, stages: tuple[str, ...] = STAGES) -> None:
        self._enabled = enabled
        self._stages = stages
        self._bar: tqdm | None = None  # drawn at the first stage, not before
        self._current: str | None = None
        self.done: dict[str, int] = {}

    def stage(self, name: str, total: int, *, unit: str = "item") -> None:
        self._current = name
        self.done[name] = 0
        position = self._stages.index(name) + 1 if name in self._stages else 0
        if self._bar is None:
            self._bar = tqdm(total=total, disable=not self._enabled, dynamic_ncols=True)
        self._bar.reset(total=total)
        self._bar.unit = unit
        self._bar.set_description(f"ingest {name} {position}/{len(self._stages)}", refresh=False)
        self._bar.set_postfix_str(self._summary(), refresh=True)

    def advance(self, n: int = 1) -> None:
        if self._current is not None:
            self.done[self._current] += n
        if self._bar is not None:
            self._bar.update(n)

    def close(self) -> None:
        self._current = None
        if self._bar is None:
            return
        self._bar.set_description("ingest done", refresh=False)
        self._bar.set_postfix_str(self._summary(), refresh=True)
        self._bar.close()
        self._bar = None

    def __enter__(self) -> IngestProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _summary(self) -> str:
        return ", ".join(f"{name} {count}" for name, count in self.done.items())
