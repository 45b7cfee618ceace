"""Per-slice summaries of an eval run: quality, latency per stage, LLM calls and cost per turn."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ragtiller.eval.datasets import OVERALL, EvalDataset
from ragtiller.eval.metrics import QueryScores, percentile, score_query
from ragtiller.eval.runner import EvalRun, QueryResult

TOTAL = "total"
"""Key of the whole turn's latency in ``RunManifest.latency_ms``."""


@dataclass(frozen=True)
class Latency:
    """Percentiles of one stage's wall time over a slice, in milliseconds."""

    p50: float | None
    p95: float | None


@dataclass(frozen=True)
class SliceMetrics:
    """Metrics of one slice (or of every query, slice ``all``).

    Quality metrics average over the judged queries (those with a relevant document);
    queries with none are counted in ``n_no_relevant`` and left out of the averages, which
    are None when no query is judged. Latency and LLM use cover every query of the slice.

    Attributes:
        n_queries: Queries in the slice.
        n_no_relevant: Of those, queries without any document of grade ``> 0``.
        ndcg_at_10: Mean NDCG@10, graded gains.
        mrr_at_10: Mean reciprocal rank of the first relevant document within 10.
        recall_at_10: Mean share of relevant documents within 10.
        recall_at_100: Mean share of relevant documents within 100.
        latency_ms: Stage (and ``total``) -> p50 / p95, in milliseconds.
        llm_calls_per_turn: Mean LLM calls per turn.
        cost_usd_per_turn: Mean incremental cost per turn, in USD.
    """

    n_queries: int
    n_no_relevant: int
    ndcg_at_10: float | None
    mrr_at_10: float | None
    recall_at_10: float | None
    recall_at_100: float | None
    latency_ms: Mapping[str, Latency]
    llm_calls_per_turn: float
    cost_usd_per_turn: float

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return asdict(self)


def query_scores(run: EvalRun, dataset: EvalDataset) -> dict[str, QueryScores | None]:
    """Query id -> its metrics (None for a query without relevant documents)."""
    return {qid: score_query(r.ranking, dataset.qrels[qid]) for qid, r in run.results.items()}


def turn_latency(result: QueryResult) -> dict[str, float]:
    """Stage -> ms for one turn, with ``total`` (the sum of stages when the manifest lacks it)."""
    latency = dict(result.manifest.latency_ms)
    latency.setdefault(TOTAL, math.fsum(latency.values()))
    return latency


def _mean(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def summarize_queries(
    results: Sequence[QueryResult],
    scores: Sequence[QueryScores | None],
) -> SliceMetrics:
    """Metrics over one group of results; ``scores`` is parallel to ``results``."""
    judged = [s for s in scores if s is not None]
    latencies = [turn_latency(r) for r in results]
    stages = sorted({stage for lat in latencies for stage in lat})
    per_stage = {s: [lat[s] for lat in latencies if s in lat] for s in stages}
    return SliceMetrics(
        n_queries=len(results),
        n_no_relevant=len(scores) - len(judged),
        ndcg_at_10=_mean([s.ndcg_at_10 for s in judged]),
        mrr_at_10=_mean([s.mrr_at_10 for s in judged]),
        recall_at_10=_mean([s.recall_at_10 for s in judged]),
        recall_at_100=_mean([s.recall_at_100 for s in judged]),
        latency_ms={s: Latency(percentile(v, 50), percentile(v, 95)) for s, v in per_stage.items()},
        llm_calls_per_turn=_mean([float(r.manifest.llm_calls) for r in results]) or 0.0,
        cost_usd_per_turn=_mean([r.manifest.cost_usd for r in results]) or 0.0,
    )


def summarize(
    run: EvalRun,
    dataset: EvalDataset,
    *,
    slices: Mapping[str, str] | None = None,
) -> dict[str, SliceMetrics]:
    """Metrics per slice, and over every query under the key ``all`` (first).

    Args:
        run: The eval run.
        dataset: The dataset it ran.
        slices: Query id -> slice; default: ``run.slices(dataset)``.
    """
    slice_of = run.slices(dataset) if slices is None else slices
    scores = query_scores(run, dataset)
    groups: dict[str, list[str]] = {OVERALL: list(run.results)}
    for qid in run.results:
        groups.setdefault(slice_of[qid], []).append(qid)
    return {
        name: summarize_queries([run.results[q] for q in qids], [scores[q] for q in qids])
        for name, qids in sorted(groups.items(), key=lambda kv: (kv[0] != OVERALL, kv[0]))
    }
