"""Per-slice summaries of an eval run: quality, text returned, latency, LLM calls, degradation."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ragtiller.eval.datasets import OVERALL, DatasetKind, EvalDataset
from ragtiller.eval.metrics import (
    QueryScores,
    answer_hit_at_k,
    answer_rr_at_k,
    percentile,
    score_query,
)
from ragtiller.eval.runner import EvalRun, QueryResult

TOTAL = "total"
"""Key of the whole turn's latency in ``RunManifest.latency_ms``."""

HIT_KS = (1, 5, 10, 20)
"""The k of the answer hit@k columns."""

PRIMARY_METRIC: Mapping[DatasetKind, str] = {
    "documents": "ndcg_at_10",
    "passages": "answer_mrr_at_10",
}
"""Per dataset kind, the per-query metric that ``promote`` and ``tune`` compare."""
METRIC_LABELS = {"ndcg_at_10": "NDCG@10", "answer_mrr_at_10": "answer MRR@10"}


@dataclass(frozen=True)
class Percentiles:
    """p50 and p95 of a quantity over a slice (None when there is nothing to measure)."""

    p50: float | None
    p95: float | None


@dataclass(frozen=True)
class SliceMetrics:
    """Metrics of one slice (or of every query, slice ``all``).

    Document metrics average over the judged queries (those with a relevant document);
    queries with none are counted in ``n_no_relevant`` and left out of the averages, which
    are None when no query is judged. For a QA dataset they judge the gold document (the
    article), and the answer metrics judge the passages. Everything else covers every query.

    Attributes:
        n_queries: Queries in the slice.
        n_no_relevant: Of those, queries without any document of grade ``> 0``.
        ndcg_at_10: Mean NDCG@10, graded gains, over unique documents.
        mrr_at_10: Mean reciprocal rank of the first relevant document within 10.
        recall_at_10: Mean share of relevant documents within 10.
        recall_at_100: Mean share of relevant documents within 100.
        hit_at_1: Answer hit@1 (QA datasets), likewise ``hit_at_5``, ``hit_at_10`` and
            ``hit_at_20``; None for a document dataset, or when some turn of the slice was
            asked for fewer than k passages (its hit@k would not be measured).
        answer_mrr_at_10: Mean reciprocal rank of the first passage holding an answer (QA).
        words_per_passage: Mean words of a returned passage, over every passage returned.
        context_words: Percentiles of the words of each turn's ``context`` string.
        latency_ms: Stage (and ``total``) -> p50 / p95, in milliseconds.
        llm_calls_per_turn: Mean LLM calls per turn.
        cost_usd_per_turn: Mean incremental cost per turn, in USD.
        degraded_turns: Turns whose manifest lists a degradation label.
    """

    n_queries: int
    n_no_relevant: int
    ndcg_at_10: float | None
    mrr_at_10: float | None
    recall_at_10: float | None
    recall_at_100: float | None
    hit_at_1: float | None
    hit_at_5: float | None
    hit_at_10: float | None
    hit_at_20: float | None
    answer_mrr_at_10: float | None
    words_per_passage: float | None
    context_words: Percentiles
    latency_ms: Mapping[str, Percentiles]
    llm_calls_per_turn: float
    cost_usd_per_turn: float
    degraded_turns: int

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return asdict(self)

    def headline(self, metric: str) -> float | None:
        """The value of ``metric`` (a :data:`PRIMARY_METRIC` value) for this slice."""
        value: float | None = getattr(self, metric)
        return value


def primary_metric(dataset: EvalDataset) -> str:
    """The per-query metric compared for ``dataset``: NDCG@10, or answer MRR@10 for QA."""
    return PRIMARY_METRIC[dataset.kind]


def query_scores(run: EvalRun, dataset: EvalDataset) -> dict[str, QueryScores | None]:
    """Query id -> its document metrics (None for a query without relevant documents)."""
    return {qid: score_query(r.ranking, dataset.qrels[qid]) for qid, r in run.results.items()}


def primary_scores(run: EvalRun, dataset: EvalDataset) -> dict[str, float | None]:
    """Query id -> its :func:`primary_metric` value (None: the query is not judged)."""
    if dataset.kind == "passages":
        return {qid: answer_rr_at_k(r.answer_hits, 10) for qid, r in run.results.items()}
    return {
        qid: None if s is None else s.ndcg_at_10 for qid, s in query_scores(run, dataset).items()
    }


def turn_latency(result: QueryResult) -> dict[str, float]:
    """Stage -> ms for one turn, with ``total`` (the sum of stages when the manifest lacks it)."""
    latency = dict(result.manifest.latency_ms)
    latency.setdefault(TOTAL, math.fsum(latency.values()))
    return latency


def _mean(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def _spread(values: Sequence[float]) -> Percentiles:
    return Percentiles(percentile(values, 50), percentile(values, 95))


def _hit_rate(results: Sequence[QueryResult], k: int) -> float | None:
    """Answer hit@k; None when a turn was asked for fewer than k passages."""
    if any(r.manifest.top_k.get("final", k) < k for r in results):
        return None
    return _mean([float(answer_hit_at_k(r.answer_hits, k)) for r in results])


def summarize_queries(
    results: Sequence[QueryResult],
    scores: Sequence[QueryScores | None],
    *,
    kind: DatasetKind = "documents",
) -> SliceMetrics:
    """Metrics over one group of results; ``scores`` is parallel to ``results``."""
    judged = [s for s in scores if s is not None]
    latencies = [turn_latency(r) for r in results]
    stages = sorted({stage for lat in latencies for stage in lat})
    per_stage = {s: [lat[s] for lat in latencies if s in lat] for s in stages}
    qa = kind == "passages" and bool(results)
    hits = {k: _hit_rate(results, k) if qa else None for k in HIT_KS}
    return SliceMetrics(
        n_queries=len(results),
        n_no_relevant=len(scores) - len(judged),
        ndcg_at_10=_mean([s.ndcg_at_10 for s in judged]),
        mrr_at_10=_mean([s.mrr_at_10 for s in judged]),
        recall_at_10=_mean([s.recall_at_10 for s in judged]),
        recall_at_100=_mean([s.recall_at_100 for s in judged]),
        hit_at_1=hits[1],
        hit_at_5=hits[5],
        hit_at_10=hits[10],
        hit_at_20=hits[20],
        answer_mrr_at_10=_mean([answer_rr_at_k(r.answer_hits, 10) for r in results])
        if qa
        else None,
        words_per_passage=_mean([float(w) for r in results for w in r.passage_words]),
        context_words=_spread([float(r.context_words) for r in results]),
        latency_ms={s: _spread(v) for s, v in per_stage.items()},
        llm_calls_per_turn=_mean([float(r.manifest.llm_calls) for r in results]) or 0.0,
        cost_usd_per_turn=_mean([r.manifest.cost_usd for r in results]) or 0.0,
        degraded_turns=sum(1 for r in results if r.manifest.degraded),
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
        name: summarize_queries(
            [run.results[q] for q in qids], [scores[q] for q in qids], kind=dataset.kind
        )
        for name, qids in sorted(groups.items(), key=lambda kv: (kv[0] != OVERALL, kv[0]))
    }
