"""The promotion decision: deterministic rules from the candidate policy's ``promotion`` block."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from ragtiller.eval.compare import Comparison
from ragtiller.eval.datasets import OVERALL, EvalDataset
from ragtiller.eval.fingerprint import dataset_fingerprint
from ragtiller.eval.honesty import EVAL_DEADLINE_S, Degradation
from ragtiller.eval.summary import METRIC_LABELS, TOTAL
from ragtiller.eval.variants import policy_ref
from ragtiller.policies.evidence import ARTIFACT_KIND, ARTIFACT_SCHEMA_VERSION
from ragtiller.policies.schema import PromotionConfig, RetrievalPolicy


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
    under ``min_slice_queries`` is reported, not judged: one query moves its mean too far."""
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
    floor = -rules.max_slice_regression
    for scope, lift in lifts.items():
        if scope == OVERALL or lift.mean is None:
            continue
        if lift.n < rules.min_slice_queries:
            detail = (
                f"{lift_of} {lift.mean:+.4f} not judged: {lift.n} judged queries < "
                f"min_slice_queries {rules.min_slice_queries}"
            )
            reasons.append(
                RuleResult("max_slice_regression", scope, True, lift.mean, floor, detail)
            )
        else:
            reasons.append(_at_least("max_slice_regression", scope, lift.mean, floor, lift_of))
    overall = comparison.candidate[OVERALL]
    p95 = overall.latency_ms[TOTAL].p95 if TOTAL in overall.latency_ms else None
    calls = overall.llm_calls_per_turn if overall.n_queries else None
    for rule, observed, what in (
        ("max_p95_latency_ms", p95, "p95 turn latency (ms)"),
        ("max_llm_calls_per_turn", calls, "LLM calls per turn"),
    ):
        reasons.append(_at_most(rule, observed, getattr(rules, rule), what))
    return PromotionDecision(
        "promote" if all(r.passed for r in reasons) else "reject", tuple(reasons)
    )


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


def dumps_decision(artifact: dict[str, Any]) -> str:
    """The artifact as JSON with sorted keys and a trailing newline."""
    return json.dumps(artifact, indent=2, sort_keys=True, allow_nan=False) + "\n"


def write_decision(artifact: dict[str, Any], path: str | Path) -> None:
    """Write the artifact as :func:`dumps_decision` does, creating parent folders."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(dumps_decision(artifact), encoding="utf-8")
