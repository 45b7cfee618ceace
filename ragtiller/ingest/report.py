"""What one ingest did, as the CLI prints it and ``ingest()`` returns it."""

from __future__ import annotations

from dataclasses import dataclass

from ragtiller.ingest.sources import SkippedSource
from ragtiller.ingest.store_sync import ChangeCounts, Cleanup


@dataclass(frozen=True)
class IngestReport:
    """The counts of one ingest (``version``: the one written, None when nothing was saved)."""

    documents: ChangeCounts
    chunks: ChangeCounts
    embedded: int
    cleanup: Cleanup = "full"
    rebuild_reason: str | None = None
    version: str | None = None
    skipped: tuple[SkippedSource, ...] = ()

    @property
    def changed(self) -> bool:
        return self.chunks.changed or self.rebuild_reason is not None

    def summary(self) -> str:
        """One line, as ``ragtiller ingest`` prints it.

        Example:
            >>> IngestReport(ChangeCounts(added=1), ChangeCounts(added=3), embedded=3).summary()
            'documents: 1 added, 0 updated, 0 unchanged, 0 deleted; chunks: 3 added, 0 updated, 0 unchanged, 0 deleted; embedded 3 texts; not saved'
        """
        parts = [f"documents: {self.documents}", f"chunks: {self.chunks}"]
        parts.append(f"embedded {self.embedded} text{'s' if self.embedded != 1 else ''}")
        if self.rebuild_reason:
            parts.append(f"full rebuild: {self.rebuild_reason}")
        if self.version:
            parts.append(f"saved as {self.version}")
        elif not self.changed and self.chunks.unchanged:
            parts.append("index unchanged, not rewritten")
        else:
            parts.append("not saved")
        if self.skipped:
            parts.append(f"{len(self.skipped)} path{'s' if len(self.skipped) != 1 else ''} skipped")
        return "; ".join(parts)
