"""Does the index hold the dataset's documents? An eval against the wrong index scores zeros.

Checked before any turn runs: documents are matched as the metrics match them (BEIR: the
corpus ``_id``; QA: the path under ``docs/``, see :func:`ragtiller.eval.qa.document_key`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ragtiller.errors import EvalError
from ragtiller.eval.datasets import EvalDataset


@dataclass(frozen=True)
class Coverage:
    """How many of the dataset's documents the index holds.

    Attributes:
        found: Dataset documents the index holds.
        total: Dataset documents (BEIR: those the split judges; QA: the files under docs/).
    """

    found: int
    total: int

    def line(self, dataset: EvalDataset) -> str:
        """One line for the report."""
        what = "judged documents" if dataset.kind == "documents" else "documents under docs/"
        return f"index holds {self.found} of the dataset's {self.total} {what}"


def index_doc_ids(index: Any) -> list[str]:
    """The distinct ``doc_id`` of every chunk of an embedded index (first-appearance order)."""
    records = index.store.records
    ids = (
        str(md.get("doc_id") or rid) for rid, md in zip(records.ids, records.metadatas, strict=True)
    )
    return list(dict.fromkeys(ids))


def check_coverage(dataset: EvalDataset, doc_ids: Iterable[str]) -> Coverage:
    """Count the dataset's documents among ``doc_ids`` (the index's).

    Raises:
        EvalError: The index holds none of them; the message shows ids from both sides.
    """
    seen = list(doc_ids)
    held = {dataset.document_key(doc_id) for doc_id in seen}
    coverage = Coverage(len(dataset.documents & held), len(dataset.documents))
    if coverage.total and not coverage.found:
        ours = ", ".join(repr(d) for d in seen[:3]) or "none: the index is empty"
        theirs = ", ".join(repr(d) for d in sorted(dataset.documents)[:3])
        source = "its corpus.jsonl" if dataset.kind == "documents" else "its docs/ folder"
        raise EvalError(
            f"the index and dataset {dataset.name} share no document (index: {ours}; "
            f"dataset: {theirs}); every metric would be 0. Ingest {source} into the index"
        )
    return coverage
