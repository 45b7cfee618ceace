"""Per-slice summaries of an eval run: quality, text returned, latency, LLM calls, degradation."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
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

TOTAL = "total"  # the whole turn's key in ``RunManifest.latency_ms``
HIT_KS = (1, 5, 10, 20)
PRIMARY_METRIC: Mapping[DatasetKind, str] = {
    "documents": "ndcg_at_10",
    "passages": "answer_mrr_at_10",
}
"""Per dataset kind, the per-query metric that ``promote`` and ``tune`` compare."""
METRIC_LABELS = {"ndcg_at_10": "NDCG@10", "answer_mrr_at_10": "answer MRR@10"}


@dataclass(frozen=True)
class Percentiles:
    p50: float | None
    p95: float | None


@dataclass(frozen=True)
class SliceMetrics:
    """Metrics of one slice (``all``: every query). Document metrics average over the judged
    queries; hit@k is None when some turn was asked for fewer than k passages."""

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
        return asdict(self)

    def headline(self, metric: str) -> float | None:
        """The value of ``metric`` (a :data:`PRIMARY_METRIC` value)."""
        value: float | None = getattr(self, metric)
        return value


def primary_metric(dataset: EvalDataset) -> str:
    """The per-query metric compared for ``dataset``: NDCG@10, or answer MRR@10 for QA."""
    return PRIMARY_METRIC[dataset.kind]


def query_scores(run: EvalRun, dataset: EvalDataset) -> dict[str, QueryScores | None]:
    return {qid: score_query(r.ranking, dataset.qrels[qid]) for qid, r in run.results.items()}


def primary_scores(run: EvalRun, dataset: EvalDataset) -> dict[str, float | None]:
    """Query id -> its :func:`primary_metric` value (None: not judged)."""
    if dataset.kind == "passages":
        return {qid: answer_rr_at_k(r.answer_hits, 10) for qid, r in run.results.items()}
    return {
        qid: None if s is None else s.ndcg_at_10 for qid, s in query_scores(run, dataset).items()
    }


def by_slice(query_ids: Iterable[str], slices: Mapping[str, str]) -> dict[str, list[str]]:
    """Slice -> its query ids: ``all`` (every id) first, then the slices by name."""
    groups: dict[str, list[str]] = {OVERALL: list(query_ids)}
    for qid in list(groups[OVERALL]):
        groups.setdefault(slices[qid], []).append(qid)
    return dict(sorted(groups.items(), key=lambda kv: (kv[0] != OVERALL, kv[0])))


def _mean(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def _spread(values: Sequence[float]) -> Percentiles:
    return Percentiles(percentile(values, 50), percentile(values, 95))


def _hit_rate(results: Sequence[QueryResult], k: int) -> float | None:
    if any(r.manifest.top_k.get("final", k) < k for r in results):
        return None
    return _mean([float(answer_hit_at_k(r.answer_hits, k)) for r in results])


def summarize_queries(
    results: Sequence[QueryResult],
    scores: Sequence[QueryScores | None],
    *,
    kind: DatasetKind = "documents",
) -> SliceMetrics:
    judged = [s for s in scores if s is not None]
    latencies = []
    for r in results:  # the sum of stages when the manifest lacks a total
        latency = dict(r.manifest.latency_ms)
        latency.setdefault(TOTAL, math.fsum(latency.values()))
        latencies.append(latency)
    stages = sorted({stage for lat in latencies for stage in lat})
    qa = kind == "passages" and bool(results)
    quality = {f.name: _mean([getattr(s, f.name) for s in judged]) for f in fields(QueryScores)}
    hits = {f"hit_at_{k}": _hit_rate(results, k) if qa else None for k in HIT_KS}
    return SliceMetrics(
        n_queries=len(results),
        n_no_relevant=len(scores) - len(judged),
        **quality,
        **hits,
        answer_mrr_at_10=_mean([answer_rr_at_k(r.answer_hits, 10) for r in results])
        if qa
        else None,
        words_per_passage=_mean([float(w) for r in results for w in r.passage_words]),
        context_words=_spread([float(r.context_words) for r in results]),
        latency_ms={s: _spread([lat[s] for lat in latencies if s in lat]) for s in stages},
        llm_calls_per_turn=_mean([float(r.manifest.llm_calls) for r in results]) or 0.0,
        cost_usd_per_turn=_mean([r.manifest.cost_usd for r in results]) or 0.0,
        degraded_turns=sum(1 for r in results if r.manifest.degraded),
    )


def summarize(
    run: EvalRun, dataset: EvalDataset, *, slices: Mapping[str, str] | None = None
) -> dict[str, SliceMetrics]:
    """Metrics per slice (default: ``run.slices(dataset)``), ``all`` first."""
    scores = query_scores(run, dataset)
    groups = by_slice(run.results, run.slices(dataset) if slices is None else slices)
    return {
        name: summarize_queries(
            [run.results[q] for q in qids], [scores[q] for q in qids], kind=dataset.kind
        )
        for name, qids in groups.items()
    }
