"""Figures an eval can stand behind: a degraded turn did not run the policy measured, so it is
refused unless allowed; live deadlines would move the figures with the machine's load, so they
are lifted to :data:`EVAL_DEADLINE_S`; and a decision is evidence only for the index, data and
machine it was measured on, so runs carry fingerprints that ``compare_runs`` checks."""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragtiller.core.run_manifest import RunManifest
from ragtiller.errors import EvalError
from ragtiller.eval.datasets import EvalDataset, dataset_sha256
from ragtiller.eval.runner import EvalRun
from ragtiller.eval.variants import with_overrides
from ragtiller.models.embedders import embedder_variant
from ragtiller.models.onnx_model import runtime_environment
from ragtiller.policies.schema import DeadlinesConfig, RetrievalPolicy

EVAL_DEADLINE_S = 600.0
"""Far above any healthy turn, so none is cut by load, yet a hung provider still ends."""


@dataclass(frozen=True)
class Degradation:
    """Turns of a run that were degraded (or, :func:`not_searched`, not searched), by label."""

    turns: int
    total: int
    labels: Mapping[str, int]  # label -> turns that carry it, most frequent first
    what: str = "degraded"
    note: str = ""
    key: str = "labels"

    def summary(self) -> str:
        """One line: ``2 of 50 turns degraded: tier_search (dense) failed: timeout (2)``."""
        head = f"{self.turns} of {self.total} turns {self.what}"
        if not self.turns:
            return head
        return f"{head}{self.note}: " + "; ".join(f"{k} ({n})" for k, n in self.labels.items())

    def to_json(self) -> dict[str, object]:
        return {"turns": self.turns, "total": self.total, self.key: dict(self.labels)}


def _tally(
    run: EvalRun, labels: Callable[[RunManifest], Iterable[str]]
) -> tuple[int, int, dict[str, int]]:
    per_turn = [set(labels(r.manifest)) for r in run.results.values()]
    counts = Counter(label for turn in per_turn for label in turn)
    ordered = dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
    return sum(1 for turn in per_turn if turn), len(per_turn), ordered


def degradation(run: EvalRun) -> Degradation:
    return Degradation(*_tally(run, lambda m: m.degraded))


def not_searched(run: EvalRun) -> Degradation:
    """Turns the router did not search: its rule, not a fault, but they score 0, so named."""

    def reason(m: RunManifest) -> list[str]:
        return [m.no_retrieval_reason or "unknown"] if m.query_type == "no_retrieval" else []

    note = " (the router's rule; they score 0)"
    return Degradation(*_tally(run, reason), "not searched", note, "reasons")


def check_degraded(run: EvalRun, *, allow: bool, what: str) -> None:
    """Refuse a run with a degraded turn, unless ``allow``."""
    found = degradation(run)
    if found.turns and not allow:
        raise EvalError(
            f"{what}: {found.summary()}; these figures are not the policy's. Fix the cause, "
            "or pass --allow-degraded to report them anyway"
        )


def without_deadlines(policy: RetrievalPolicy) -> RetrievalPolicy:
    """The policy with every ``deadlines.*`` set to :data:`EVAL_DEADLINE_S` (nothing else)."""
    lifted = {name: EVAL_DEADLINE_S for name in DeadlinesConfig.model_fields}
    return with_overrides(policy, {"deadlines": lifted})


def deadlines_line(policy: RetrievalPolicy) -> str:
    own = ", ".join(f"{name} {value:g}" for name, value in policy.deadlines.model_dump().items())
    return f"deadlines lifted to {EVAL_DEADLINE_S:g} s for the eval (the policy's: {own})"


def depth_line(policy: RetrievalPolicy, measured: RetrievalPolicy) -> str | None:
    """The report's line when ``--top-k`` fuses more of each tier's hits than a turn does."""
    own, asked = policy.budgets.candidate_cap, measured.budgets.candidate_cap
    if own == asked:
        return None
    return (
        f"each tier asked for {asked} hits, a turn of this policy for {own}: the top of this "
        "ranking can differ from a turn's (docs/eval.md)"
    )


def file_sha256(path: Path) -> str:
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def dataset_fingerprint(dataset: EvalDataset, *, files: bool = True) -> dict[str, Any]:
    """The dataset's name, kind, split, hash, query count and (``files``) each file's sha256."""
    fingerprint: dict[str, Any] = {
        "name": dataset.name,
        "kind": dataset.kind,
        "split": dataset.split,
        "sha256": dataset.sha256,
        "n_queries": len(dataset.queries),
    }
    if files:
        fingerprint["files"] = {
            name: file_sha256(paths[0]) if len(paths) == 1 else dataset_sha256(paths)
            for name, paths in dataset.files.items()
        }
    return fingerprint


def index_fingerprint(index: Any) -> dict[str, Any] | None:
    """What an index was built with and its queries are embedded with here (None: no manifest)."""
    manifest = getattr(index, "manifest", None)
    store = getattr(index, "store", None)
    if manifest is None or store is None:
        return None
    return {
        "embedder": manifest.embedder.model_dump(mode="json"),
        "embedder_variant": manifest.embedder_variant,
        "chunking": manifest.chunking.model_dump(mode="json"),
        "lexical": manifest.lexical.model_dump(mode="json"),
        "counts": manifest.counts.model_dump(mode="json"),
        "chunks_sha256": hashlib.sha256("\n".join(store.records.ids).encode()).hexdigest(),
        "queries": {"embedder_variant": embedder_variant(index.embedder), **runtime_environment()},
    }


def same_index(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> bool:
    return (None if a is None else dict(a)) == (None if b is None else dict(b))


@dataclass(frozen=True)
class Coverage:
    """How many of the dataset's documents the index holds."""

    found: int
    total: int

    def line(self, dataset: EvalDataset) -> str:
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
    """Count the dataset's documents in the index; none is an error, as every metric would be 0."""
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
