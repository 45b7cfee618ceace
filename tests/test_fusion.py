"""Fusion maths against hand-computed values, including the degenerate cases."""

from __future__ import annotations

import math

import pytest
from fixtures.fakes import hit

from ragtiller.ranking.fusion import (
    MISSING_Z_FLAT,
    fuse_hits,
    minmax_fusion,
    reciprocal_rank_fusion,
    zscore_fusion,
    zscores,
)


def test_zscores_hand_computed() -> None:
    # mean 2, population sigma sqrt(2/3)
    sigma = math.sqrt(2 / 3)
    assert zscores([1.0, 2.0, 3.0]) == pytest.approx([-1 / sigma, 0.0, 1 / sigma])


@pytest.mark.parametrize("scores", [[5.0], [2.0, 2.0, 2.0]])
def test_zscores_flat_or_single_are_zero_not_nan(scores: list[float]) -> None:
    assert zscores(scores) == [0.0] * len(scores)


def test_rrf_hand_computed() -> None:
    fused = reciprocal_rank_fusion({"dense": ["a", "b", "c"], "lexical": ["c", "a"]}, k=60)
    assert fused["a"] == pytest.approx(1 / 61 + 1 / 62)
    assert fused["b"] == pytest.approx(1 / 62)
    assert fused["c"] == pytest.approx(1 / 63 + 1 / 61)


def test_rrf_weights_and_bad_k() -> None:
    fused = reciprocal_rank_fusion(
        {"dense": ["a"], "lexical": ["b"]}, k=10, weights={"lexical": 2.0}
    )
    assert fused == {"a": pytest.approx(1 / 11), "b": pytest.approx(2 / 11)}
    with pytest.raises(ValueError, match="k must be > 0, but got 0"):
        reciprocal_rank_fusion({"dense": ["a"]}, k=0)


def test_zscore_fusion_missing_gets_list_minimum() -> None:
    fused = zscore_fusion(
        {"dense": {"a": 3.0, "b": 1.0}, "lexical": {"b": 10.0, "c": 4.0, "d": 1.0}}
    )
    # dense z: a=+1, b=-1 (min); lexical: mean 5, sigma sqrt(14) -> b=5/s, c=-1/s, d=-4/s (min)
    s = math.sqrt(14)
    assert fused["a"] == pytest.approx(1 + -4 / s)
    assert fused["b"] == pytest.approx(-1 + 5 / s)
    assert fused["c"] == pytest.approx(-1 + -1 / s)
    assert all(math.isfinite(v) for v in fused.values())


def test_zscore_fusion_one_hit_tier_has_no_nan() -> None:
    fused = zscore_fusion({"dense": {"a": 0.9, "b": 0.1}, "lexical": {"a": 7.0}})
    # lexical is flat: a gets 0, b (missing) gets -1
    assert fused == {"a": pytest.approx(1.0), "b": pytest.approx(-1.0 + MISSING_Z_FLAT)}


def test_minmax_fusion_hand_computed() -> None:
    fused = minmax_fusion({"dense": {"a": 0.8, "b": 0.4, "c": 0.6}, "lexical": {"c": 3.0}})
    assert fused == {
        "a": pytest.approx(1.0),
        "b": pytest.approx(0.0),
        "c": pytest.approx(0.5 + 1.0),
    }


def test_fuse_hits_keeps_every_tier_score_and_caps() -> None:
    hits = {
        "dense": [hit("dense", "a", 0.9), hit("dense", "b", 0.5)],
        "lexical": [hit("lexical", "b", 12.0), hit("lexical", "c", 3.0)],
    }
    cands = fuse_hits(hits, method="rrf", cap=2, rrf_k=60)
    assert [c["id"] for c in cands] == ["b", "a"]  # b: 1/62+1/61 beats a: 1/61
    b = cands[0]
    assert b["tier_scores"] == {"dense": 0.5, "lexical": 12.0}
    assert b["tier_ranks"] == {"dense": 2, "lexical": 1}
    assert set(b["tier_z"]) == {"dense", "lexical"}
    assert cands[1]["tier_scores"] == {"dense": 0.9}  # a miss is absent, never 0


@pytest.mark.parametrize("method", ["rrf", "zscore", "minmax"])
def test_fuse_hits_every_method_is_finite_and_deterministic(method: str) -> None:
    hits = {
        "dense": [hit("dense", "x", 0.5), hit("dense", "y", 0.5)],
        "parent_child": [hit("parent_child", "p", 0.7)],
        "lexical": [],
    }
    first = fuse_hits(hits, method=method, cap=10)  # type: ignore[arg-type]
    again = fuse_hits(hits, method=method, cap=10)  # type: ignore[arg-type]
    assert [c["id"] for c in first] == [c["id"] for c in again]
    assert all(math.isfinite(c["fused_score"]) for c in first)


def test_fuse_hits_rejects_unknown_method() -> None:
    with pytest.raises(
        ValueError, match="unknown fusion method 'best'; valid: rrf, zscore, minmax"
    ):
        fuse_hits({"dense": [hit("dense", "a", 1.0)]}, method="best", cap=5)  # type: ignore[arg-type]


def test_rrf_ties_break_by_best_tier_rank_then_tier_order() -> None:
    hits = {
        "dense": [hit("dense", "z", 0.9), hit("dense", "m", 0.5)],
        "lexical": [hit("lexical", "a", 7.0), hit("lexical", "n", 1.0)],
    }
    order = [c["id"] for c in fuse_hits(hits, method="rrf", cap=10)]
    # z and a tie at 1/61, m and n at 1/62: the earlier tier (dense) wins each tie, ids aside.
    assert order == ["z", "a", "m", "n"]
