import json
from pathlib import Path

import pytest

from ragtiller.core.run_manifest import RunManifest
from ragtiller.eval import (
    EvalRun,
    QueryResult,
    bootstrap_ci,
    compare_runs,
    decide,
    decision_artifact,
    load_beir,
    paired_differences,
    promotion,
    write_decision,
)
from ragtiller.eval.promotion import dumps_decision
from ragtiller.eval.variants import policy_sha256
from ragtiller.policies import load_policy
from ragtiller.policies.schema import PromotionConfig

TINY = Path(__file__).parent / "data" / "tiny_beir"
LABELLED = load_beir(TINY, slices=TINY / "slices.tsv")
# Slices: q1, q2 lexical; q3, q4 synthesis (q4 has no relevant doc); q5 factual.
BEST = {"q1": ["d1", "d2"], "q2": ["d3"], "q3": ["d5", "d4"], "q4": [], "q5": ["d7"]}
WORST: dict[str, list[str]] = {q: [] for q in BEST}


def make_run(
    rankings: dict[str, list[str]],
    *,
    policy: str = "p",
    total_ms: float = 10.0,
    llm_calls: int = 0,
    route: str = "factual_lookup",
    dataset_sha256: str = LABELLED.sha256,
) -> EvalRun:
    results = {
        qid: QueryResult(
            qid,
            tuple(ranking),
            RunManifest(
                run_id=qid,
                created_at="2026-01-01T00:00:00Z",
                policy_id=policy,
                policy_version="1",
                query_type=route,
                latency_ms={"total": total_ms},
                llm_calls=llm_calls,
            ),
        )
        for qid, ranking in rankings.items()
    }
    return EvalRun(policy, "1", dataset_sha256, results)


def test_bootstrap_is_deterministic_per_seed_and_slice() -> None:
    diffs = [0.3, -0.1, 0.05, 0.2, 0.0, -0.05, 0.4]
    first = bootstrap_ci(diffs, seed=11, n_resamples=1000, stream="lexical")
    assert first == bootstrap_ci(diffs, seed=11, n_resamples=1000, stream="lexical")
    assert first != bootstrap_ci(diffs, seed=12, n_resamples=1000, stream="lexical")
    assert first != bootstrap_ci(diffs, seed=11, n_resamples=1000, stream="synthesis")
    mean = sum(diffs) / len(diffs)
    assert first[0] < mean < first[1]
    assert min(diffs) <= first[0] and first[1] <= max(diffs)


def test_bootstrap_of_constant_differences_is_a_point() -> None:
    assert bootstrap_ci([0.1, 0.1, 0.1], seed=0) == (0.1, 0.1)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"differences": []}, "at least one difference"),
        ({"differences": [0.1], "n_resamples": 10}, "n_resamples must be >= 100, but got 10"),
        ({"differences": [0.1], "confidence": 1.0}, r"confidence must be in \(0, 1\), but got 1.0"),
    ],
)
def test_bootstrap_rejects_bad_arguments(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        bootstrap_ci(seed=0, **kwargs)  # type: ignore[arg-type]


def test_paired_differences_skip_queries_without_relevant_docs() -> None:
    diffs = paired_differences(make_run(BEST), make_run(WORST), LABELLED)
    assert diffs == {"q1": 1.0, "q2": 1.0, "q3": 1.0, "q5": 1.0}


def test_comparison_lifts_per_slice() -> None:
    cmp = compare_runs(make_run(BEST), make_run(WORST), LABELLED, seed=3, n_resamples=500)
    assert list(cmp.lifts) == ["all", "factual", "lexical", "synthesis"]
    assert cmp.lifts["all"].n == 4
    assert cmp.lifts["synthesis"].n == 1
    assert (cmp.lifts["lexical"].mean, cmp.lifts["lexical"].ci_low) == (1.0, 1.0)
    assert cmp.slices_from == "labels"
    assert cmp.candidate["all"].ndcg_at_10 == 1.0
    assert cmp.baseline["all"].ndcg_at_10 == 0.0


def test_without_labels_both_runs_are_sliced_by_the_baseline_route() -> None:
    ds = load_beir(TINY)
    cand = make_run(BEST, route="synthesis", dataset_sha256=ds.sha256)
    base = make_run(WORST, route="factual_lookup", dataset_sha256=ds.sha256)
    cmp = compare_runs(cand, base, ds)
    assert cmp.slices_from == "baseline-route"
    assert list(cmp.candidate) == ["all", "factual_lookup"]


def test_runs_of_another_dataset_or_other_queries_are_refused() -> None:
    from ragtiller.eval import EvalError

    with pytest.raises(EvalError, match="of another dataset"):
        compare_runs(make_run(BEST, dataset_sha256="x"), make_run(WORST), LABELLED)
    with pytest.raises(EvalError, match="same queries"):
        compare_runs(make_run({"q1": []}), make_run(WORST), LABELLED)


def _reasons(decision_rules: PromotionConfig, cand: EvalRun, base: EvalRun) -> dict[str, bool]:
    decision = decide(decision_rules, compare_runs(cand, base, LABELLED, n_resamples=200))
    reasons = {f"{r.rule}:{r.scope}": r.passed for r in decision.reasons}
    assert (decision.decision == "promote") == all(reasons.values())
    return reasons


def test_promote_when_every_rule_passes() -> None:
    rules = PromotionConfig(
        required_slices=["lexical", "synthesis"],
        min_ndcg_lift=0.05,
        max_p95_latency_ms=50.0,
        max_llm_calls_per_turn=1.0,
    )
    reasons = _reasons(rules, make_run(BEST, llm_calls=1), make_run(WORST))
    assert reasons == {
        "required_slices:lexical": True,
        "required_slices:synthesis": True,
        "min_ndcg_lift:all": True,
        "min_ndcg_lift:lexical": True,
        "min_ndcg_lift:synthesis": True,
        "max_slice_regression:factual": True,
        "max_slice_regression:lexical": True,
        "max_slice_regression:synthesis": True,
        "max_p95_latency_ms:all": True,
        "max_llm_calls_per_turn:all": True,
    }


def test_reject_on_a_slice_regression_despite_an_overall_lift(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Better on lexical (2 queries), worse on factual (q5): overall lift +0.25.
    monkeypatch.setattr(promotion, "MIN_SLICE_QUERIES", 1)  # judge every slice
    candidate = {**BEST, "q3": [], "q5": []}
    baseline = {**WORST, "q3": [], "q5": ["d7"]}
    reasons = _reasons(PromotionConfig(), make_run(candidate), make_run(baseline))
    assert reasons["min_ndcg_lift:all"] is True
    assert reasons["max_slice_regression:factual"] is False
    assert reasons["max_slice_regression:lexical"] is True


def test_a_slice_of_fewer_than_50_judged_queries_is_reported_not_judged() -> None:
    candidate = {**BEST, "q3": [], "q5": []}
    baseline = {**WORST, "q3": [], "q5": ["d7"]}
    comparison = compare_runs(make_run(candidate), make_run(baseline), LABELLED, n_resamples=200)
    decision = decide(PromotionConfig(), comparison)
    factual = next(r for r in decision.reasons if r.scope == "factual")
    assert factual.passed is True
    assert factual.observed is not None and factual.observed < -0.02  # the lift is still shown
    assert "not judged: 1 judged queries < 50" in factual.detail
    assert decision.decision == "promote"


def test_reject_on_missing_required_slice_latency_calls_and_small_lift() -> None:
    rules = PromotionConfig(
        required_slices=["noisy"],
        min_ndcg_lift=0.01,
        max_p95_latency_ms=5.0,
        max_llm_calls_per_turn=0.5,
    )
    reasons = _reasons(rules, make_run(BEST, llm_calls=1), make_run(BEST))
    assert reasons["required_slices:noisy"] is False
    assert reasons["min_ndcg_lift:noisy"] is False
    assert reasons["min_ndcg_lift:all"] is False  # lift 0 < 0.01
    assert reasons["max_p95_latency_ms:all"] is False
    assert reasons["max_llm_calls_per_turn:all"] is False


def test_unset_limits_pass_as_not_set() -> None:
    decision = decide(PromotionConfig(), compare_runs(make_run(BEST), make_run(BEST), LABELLED))
    assert decision.decision == "promote"
    latency = next(r for r in decision.reasons if r.rule == "max_p95_latency_ms")
    assert (latency.passed, latency.threshold, latency.detail) == (True, None, "not set")


def test_decision_artifact_is_stable_and_complete(tmp_path: Path) -> None:
    policy = load_policy()
    cmp = compare_runs(make_run(BEST), make_run(WORST), LABELLED, seed=5, n_resamples=300)
    decision = decide(policy.promotion, cmp)
    artifact = decision_artifact(policy, policy, LABELLED, cmp, decision)
    out = tmp_path / "nested" / "decision.json"
    write_decision(artifact, out)
    text = out.read_text("utf-8")
    assert text == dumps_decision(artifact)
    again = compare_runs(make_run(BEST), make_run(WORST), LABELLED, seed=5, n_resamples=300)
    assert dumps_decision(decision_artifact(policy, policy, LABELLED, again, decision)) == text
    data = json.loads(text)
    assert list(data) == sorted(data)
    assert data["decision"] == "promote"
    assert data["candidate"] == {
        "policy_id": "default-retrieval-policy",
        "version": policy.version,
        "sha256": policy_sha256(policy),
    }
    assert data["dataset"]["sha256"] == LABELLED.sha256
    assert data["lifts"]["lexical"] == {
        "metric": "ndcg_at_10",
        "n": 2,
        "mean": 1.0,
        "ci_low": 1.0,
        "ci_high": 1.0,
    }
    assert data["metrics"]["baseline"]["all"]["ndcg_at_10"] == 0.0
    assert data["metrics"]["candidate"]["all"]["latency_ms"]["total"] == {"p50": 10.0, "p95": 10.0}
    assert {r["rule"] for r in data["reasons"]} >= {"min_ndcg_lift", "max_slice_regression"}


def test_by_default_no_single_query_can_carry_a_judged_slice_past_the_limit() -> None:
    # A per-query metric moves by at most 1, so one query moves an n-query slice's mean by up
    # to 1/n: the default smallest judged slice must make that at most the regression limit.
    limit = PromotionConfig().max_slice_regression
    assert limit >= 1.0 / promotion.MIN_SLICE_QUERIES
    assert limit < 1.0 / (promotion.MIN_SLICE_QUERIES - 1)
