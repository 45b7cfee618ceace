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
from ragtiller.eval.variants import policy_sha256
from ragtiller.policies.evidence import ARTIFACT_KIND, ARTIFACT_SCHEMA_VERSION
from ragtiller.policies.schema import PromotionConfig, RetrievalPolicy

MIN_SLICE_QUERIES = 50
"""Judged queries a slice needs for ``max_slice_regression`` to judge it: one query moves a
per-query metric by at most 1, so an n-query slice's mean by up to 1/n, and only from
1 / 0.02 = 50 (the default limit) can no single query carry a slice past it."""


@dataclass(frozen=True)
class RuleResult:
    """One rule applied to one scope, and whether it passed.

    Attributes:
        rule: The ``promotion`` field the rule reads (``min_ndcg_lift``, ...).
        scope: ``all`` or a slice name.
        passed: Whether the candidate met the rule.
        observed: The measured value (None when nothing could be measured).
        threshold: The limit from the policy (None when the rule is not set).
        detail: One line saying why.
    """

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
    """Apply the candidate's promotion rules to a comparison.

    Rules, in order (each a reason in the decision):

    1. ``required_slices``: each required slice has at least one judged query.
    2. ``min_ndcg_lift``: the mean lift of the primary metric (NDCG@10; answer MRR@10 for a QA
       dataset) is at least ``min_ndcg_lift`` overall and in each required slice.
    3. ``max_slice_regression``: in every slice with at least :data:`MIN_SLICE_QUERIES` judged
       queries, the mean lift is at least ``-max_slice_regression``. A smaller slice's lift is
       reported (passed, its detail says "not judged"): one query moves its mean too far.
    4. ``max_p95_latency_ms``: the candidate's p95 total turn latency is at most the limit.
    5. ``max_llm_calls_per_turn``: the candidate's mean LLM calls per turn is at most the limit.

    Lifts are means of paired per-query differences; their bootstrap CIs are reported in the
    artifact next to them. A rule left unset (None) passes with the detail ``not set``.
    """
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
        if lift.n < MIN_SLICE_QUERIES:
            detail = (
                f"{lift_of} {lift.mean:+.4f} not judged: {lift.n} judged queries < "
                f"{MIN_SLICE_QUERIES}"
            )
            reasons.append(
                RuleResult("max_slice_regression", scope, True, lift.mean, floor, detail)
            )
        else:
            reasons.append(_at_least("max_slice_regression", scope, lift.mean, floor, lift_of))
    overall = comparison.candidate[OVERALL]
    p95 = overall.latency_ms[TOTAL].p95 if TOTAL in overall.latency_ms else None
    calls = overall.llm_calls_per_turn if overall.n_queries else None
    reasons.append(
        _at_most("max_p95_latency_ms", p95, rules.max_p95_latency_ms, "p95 turn latency (ms)")
    )
    reasons.append(
        _at_most(
            "max_llm_calls_per_turn", calls, rules.max_llm_calls_per_turn, "LLM calls per turn"
        )
    )
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
    """The decision as JSON-ready data: policies and their hashes, the dataset's file hashes,
    the index fingerprint, metrics, lifts, rules, reasons, and how the eval ran (deadlines
    lifted; degraded turns per run, ``candidate`` and ``baseline``).

    It holds no timestamp, so two runs with equal results give equal quality sections.
    """
    return {
        "kind": ARTIFACT_KIND,
        "schema_version": ARTIFACT_SCHEMA_VERSION,
        "decision": decision.decision,
        "candidate": _policy(candidate),
        "baseline": _policy(baseline),
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


def _policy(policy: RetrievalPolicy) -> dict[str, Any]:
    return {
        "policy_id": policy.policy_id,
        "version": policy.version,
        "sha256": policy_sha256(policy),
    }


def dumps_decision(artifact: dict[str, Any]) -> str:
    """The artifact as JSON with sorted keys (a stable order) and a trailing newline."""
    return json.dumps(artifact, indent=2, sort_keys=True, allow_nan=False) + "\n"


def write_decision(artifact: dict[str, Any], path: str | Path) -> None:
    """Write the artifact (see :func:`dumps_decision`), creating parent folders."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(dumps_decision(artifact), encoding="utf-8")
