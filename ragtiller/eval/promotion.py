"""Promotion evidence: two runs of one dataset compared query by query (bootstrap CIs of the
primary metric's lift per slice), and the candidate's ``promotion`` rules applied to that."""

from __future__ import annotations

import json
import math
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from ragtiller.errors import EvalError
from ragtiller.eval.datasets import OVERALL, EvalDataset
from ragtiller.eval.honesty import (
    EVAL_DEADLINE_S,
    Degradation,
    dataset_fingerprint,
    degradation,
    same_index,
)
from ragtiller.eval.runner import EvalRun, Evaluate
from ragtiller.eval.summary import (
    METRIC_LABELS,
    TOTAL,
    SliceMetrics,
    by_slice,
    primary_metric,
    primary_scores,
    summarize,
)
from ragtiller.eval.variants import policy_ref
from ragtiller.policies.evidence import ARTIFACT_KIND, ARTIFACT_SCHEMA_VERSION
from ragtiller.policies.schema import PromotionConfig, RetrievalPolicy

MIN_SLICE_QUERIES = 50
"""Judged queries a slice needs for ``max_slice_regression`` to judge it: one query moves a
per-query metric by at most 1, so an n-query slice's mean by up to 1/n, and only from
1 / 0.02 = 50 (the default limit) can no single query carry a slice past it."""
DEFAULT_RESAMPLES = 2000
CONFIDENCE = 0.95


def bootstrap_ci(
    differences: Sequence[float],
    *,
    seed: int,
    n_resamples: int = DEFAULT_RESAMPLES,
    confidence: float = CONFIDENCE,
    stream: str = "",
) -> tuple[float, float]:
    """Percentile bootstrap CI of the mean of paired differences, seeded per ``stream`` (slice);
    rounded to 12 decimals, as :attr:`Lift.mean` is, so no mean falls outside its CI."""
    if not differences:
        raise ValueError("bootstrap_ci needs at least one difference")
    if n_resamples < 100:
        raise ValueError(f"n_resamples must be >= 100, but got {n_resamples}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), but got {confidence}")
    values = np.asarray(differences, dtype=float)
    rng = np.random.default_rng(np.random.SeedSequence([seed, zlib.crc32(stream.encode())]))
    means = values[rng.integers(0, len(values), size=(n_resamples, len(values)))].mean(axis=1)
    tail = (1.0 - confidence) / 2.0 * 100.0
    low, high = np.percentile(means, [tail, 100.0 - tail])
    return round(float(low), 12), round(float(high), 12)


@dataclass(frozen=True)
class Lift:
    """Candidate minus baseline primary metric over the ``n`` judged queries of one slice."""

    n: int
    mean: float | None
    ci_low: float | None
    ci_high: float | None


@dataclass(frozen=True)
class Comparison:
    """Two runs of one dataset, both sliced by the labels or else the BASELINE's routes, so a
    query is paired with itself in one slice."""

    slices: Mapping[str, str]
    slices_from: str
    candidate: Mapping[str, SliceMetrics]
    baseline: Mapping[str, SliceMetrics]
    lifts: Mapping[str, Lift]
    seed: int
    n_resamples: int
    confidence: float
    metric: str = "ndcg_at_10"


def paired_differences(
    candidate: EvalRun, baseline: EvalRun, dataset: EvalDataset
) -> dict[str, float]:
    """Query id -> candidate minus baseline primary metric, for the judged queries."""
    cand, base = primary_scores(candidate, dataset), primary_scores(baseline, dataset)
    return {qid: c - b for qid, c in cand.items() if c is not None and (b := base[qid]) is not None}


def compare_runs(
    candidate: EvalRun,
    baseline: EvalRun,
    dataset: EvalDataset,
    *,
    seed: int = 0,
    n_resamples: int = DEFAULT_RESAMPLES,
    confidence: float = CONFIDENCE,
) -> Comparison:
    """Compare two runs of ``dataset`` (on one index, of the same queries) query by query."""
    for run in (candidate, baseline):
        if run.dataset_sha256 != dataset.sha256:
            raise EvalError(f"run of policy {run.policy_id!r} is of another dataset (hash differs)")
    if not same_index(candidate.index, baseline.index):
        raise EvalError(
            f"runs of {candidate.policy_id!r} and {baseline.policy_id!r} searched different "
            "indexes (embedder, chunking or chunks differ); compare runs on one index"
        )
    if set(candidate.results) != set(baseline.results):
        raise EvalError("the two runs do not cover the same queries")
    slices = baseline.slices(dataset)
    diffs = paired_differences(candidate, baseline, dataset)
    lifts = {}
    for name, qids in by_slice(baseline.results, slices).items():
        values = list(diffs.values()) if name == OVERALL else [diffs[q] for q in qids if q in diffs]
        if not values:
            lifts[name] = Lift(0, None, None, None)
            continue
        low, high = bootstrap_ci(
            values, seed=seed, n_resamples=n_resamples, confidence=confidence, stream=name
        )
        lifts[name] = Lift(len(values), round(math.fsum(values) / len(values), 12), low, high)
    return Comparison(
        slices=slices,
        slices_from="labels" if dataset.labels is not None else "baseline-route",
        candidate=summarize(candidate, dataset, slices=slices),
        baseline=summarize(baseline, dataset, slices=slices),
        lifts=lifts,
        seed=seed,
        n_resamples=n_resamples,
        confidence=confidence,
        metric=primary_metric(dataset),
    )


@dataclass(frozen=True)
class RuleResult:
    """One rule (the ``promotion`` field it reads) applied to ``all`` or a slice, and why."""

    rule: str
    scope: str
    passed: bool
    observed: float | None
    threshold: float | None
    detail: str


@dataclass(frozen=True)
class PromotionDecision:
    """``promote`` when every rule passed, else ``reject``; reasons in rule order."""

    decision: Literal["promote", "reject"]
    reasons: tuple[RuleResult, ...]


def _at_least(
    rule: str, scope: str, observed: float | None, threshold: float, what: str
) -> RuleResult:
    if observed is None:
        return RuleResult(rule, scope, False, None, threshold, f"no judged queries for {what}")
    ok = observed >= threshold
    detail = f"{what} {observed:+.4f} {'>=' if ok else '<'} {threshold:+.4f}"
    return RuleResult(rule, scope, ok, observed, threshold, detail)


def _at_most(rule: str, observed: float | None, threshold: float | None, what: str) -> RuleResult:
    if threshold is None:
        return RuleResult(rule, OVERALL, True, observed, None, "not set")
    if observed is None:
        return RuleResult(rule, OVERALL, False, None, threshold, f"no turns to measure {what}")
    ok = observed <= threshold
    detail = f"{what} {observed:.4g} {'<=' if ok else '>'} {threshold:.4g}"
    return RuleResult(rule, OVERALL, ok, observed, threshold, detail)


def decide(rules: PromotionConfig, comparison: Comparison) -> PromotionDecision:
    """Apply the candidate's promotion rules to a comparison, in docs/eval.md's order. A slice
    under :data:`MIN_SLICE_QUERIES` is reported, not judged: one query moves its mean too far."""
    lifts = comparison.lifts
    lift_of = f"{METRIC_LABELS[comparison.metric]} lift"
    reasons: list[RuleResult] = []
    for name in rules.required_slices:
        n = lifts[name].n if name in lifts else 0
        detail = f"{n} judged queries in the slice"
        reasons.append(RuleResult("required_slices", name, n > 0, float(n), 1.0, detail))
    for scope in [OVERALL, *rules.required_slices]:
        mean = lifts[scope].mean if scope in lifts else None
        reasons.append(_at_least("min_ndcg_lift", scope, mean, rules.min_ndcg_lift, lift_of))
    floor, rule = -rules.max_slice_regression, "max_slice_regression"
    for scope, lift in lifts.items():
        if scope == OVERALL or lift.mean is None:
            continue
        if lift.n < MIN_SLICE_QUERIES:
            few = f"not judged: {lift.n} judged queries < {MIN_SLICE_QUERIES}"
            detail = f"{lift_of} {lift.mean:+.4f} {few}"
            reasons.append(RuleResult(rule, scope, True, lift.mean, floor, detail))
        else:
            reasons.append(_at_least(rule, scope, lift.mean, floor, lift_of))
    overall = comparison.candidate[OVERALL]
    p95 = overall.latency_ms[TOTAL].p95 if TOTAL in overall.latency_ms else None
    calls = overall.llm_calls_per_turn if overall.n_queries else None
    for rule, observed, what in (
        ("max_p95_latency_ms", p95, "p95 turn latency (ms)"),
        ("max_llm_calls_per_turn", calls, "LLM calls per turn"),
    ):
        reasons.append(_at_most(rule, observed, getattr(rules, rule), what))
    passed = all(r.passed for r in reasons)
    return PromotionDecision("promote" if passed else "reject", tuple(reasons))


def decision_artifact(
    candidate: RetrievalPolicy,
    baseline: RetrievalPolicy,
    dataset: EvalDataset,
    comparison: Comparison,
    decision: PromotionDecision,
    *,
    index: Mapping[str, Any] | None = None,
    degraded: Mapping[str, Degradation] | None = None,
) -> dict[str, Any]:
    """The decision as JSON-ready data, with no timestamp: equal results give equal files."""
    return {
        "kind": ARTIFACT_KIND,
        "schema_version": ARTIFACT_SCHEMA_VERSION,
        "decision": decision.decision,
        "candidate": policy_ref(candidate),
        "baseline": policy_ref(baseline),
        "dataset": {**dataset_fingerprint(dataset), "slices_from": comparison.slices_from},
        "index": None if index is None else dict(index),
        "bootstrap": {
            "seed": comparison.seed,
            "n_resamples": comparison.n_resamples,
            "confidence": comparison.confidence,
        },
        "metrics": {
            "candidate": {s: m.to_json() for s, m in comparison.candidate.items()},
            "baseline": {s: m.to_json() for s, m in comparison.baseline.items()},
        },
        "lifts": {
            s: {"metric": comparison.metric, **asdict(lift)} for s, lift in comparison.lifts.items()
        },
        "eval": {
            "deadlines_s": EVAL_DEADLINE_S,
            "degraded": {run: d.to_json() for run, d in (degraded or {}).items()},
        },
        "rules": candidate.promotion.model_dump(mode="json"),
        "reasons": [asdict(r) for r in decision.reasons],
    }


@dataclass(frozen=True)
class Judgement:
    """A candidate run against a base on one dataset and judged as ``promote`` judges."""

    dataset: EvalDataset
    candidate_run: EvalRun
    baseline_run: EvalRun
    comparison: Comparison
    decision: PromotionDecision

    @property
    def promoted(self) -> bool:
        return self.decision.decision == "promote"

    @property
    def confirmed(self) -> bool:
        """Promoted, with a lift above zero (what ``tune`` asks of a held-out half)."""
        lift = self.comparison.lifts[OVERALL].mean
        return self.promoted and lift is not None and lift > 0

    def artifact(self, candidate: RetrievalPolicy, base: RetrievalPolicy) -> dict[str, Any]:
        runs = {"candidate": self.candidate_run, "baseline": self.baseline_run}
        return decision_artifact(
            candidate,
            base,
            self.dataset,
            self.comparison,
            self.decision,
            index=self.candidate_run.index,
            degraded={name: degradation(run) for name, run in runs.items()},
        )


def judge(
    candidate: RetrievalPolicy,
    base: RetrievalPolicy,
    dataset: EvalDataset,
    evaluate: Evaluate,
    *,
    seed: int = 0,
    n_resamples: int = DEFAULT_RESAMPLES,
) -> Judgement:
    """Run both policies over ``dataset``, compare them and apply the candidate's rules."""
    cand_run, base_run = evaluate(candidate, dataset), evaluate(base, dataset)
    comparison = compare_runs(cand_run, base_run, dataset, seed=seed, n_resamples=n_resamples)
    decision = decide(candidate.promotion, comparison)
    return Judgement(dataset, cand_run, base_run, comparison, decision)


def dumps_decision(artifact: dict[str, Any]) -> str:
    """The artifact as JSON with sorted keys and a trailing newline."""
    return json.dumps(artifact, indent=2, sort_keys=True, allow_nan=False) + "\n"


def write_decision(artifact: dict[str, Any], path: str | Path) -> None:
    """Write the artifact as :func:`dumps_decision` does, creating parent folders."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(dumps_decision(artifact), encoding="utf-8")
