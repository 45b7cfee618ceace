"""The free floors: z-score maths against hand-computed values, and the plain fusion order."""

from __future__ import annotations

import math

import pytest
from fixtures.fakes import hit

from ragtiller.core.tiers import Candidate
from ragtiller.ranking.fusion import fuse_hits
from ragtiller.rerankers import IdentityReranker, Reranker, ZScoreReranker

S14 = math.sqrt(14)


def candidates() -> list[Candidate]:
    """dense z: a=+1, b=-1; lexical (mean 5, sigma sqrt 14): b=5/s, c=-1/s, d=-4/s."""
    return fuse_hits(
        {
            "dense": [hit("dense", "a", 3.0), hit("dense", "b", 1.0)],
            "lexical": [
                hit("lexical", "b", 10.0),
                hit("lexical", "c", 4.0),
                hit("lexical", "d", 1.0),
            ],
        },
        method="rrf",
        cap=10,
    )


async def test_zscore_sums_tier_z_with_the_tier_minimum_for_a_miss() -> None:
    result = await ZScoreReranker().arerank("q", candidates(), top_n=10)
    # a misses lexical -> lexical's lowest z (-4/s); c and d miss dense -> dense's lowest z (-1)
    expected = {"b": -1 + 5 / S14, "a": 1 - 4 / S14, "c": -1 - 1 / S14, "d": -1 - 4 / S14}
    assert [c["id"] for c in result.candidates] == ["b", "a", "c", "d"]
    assert {c["id"]: c["final_score"] for c in result.candidates} == pytest.approx(expected)
    assert result.method == "zscore"
    assert result.error is None


async def test_zscore_weights_scale_each_tier() -> None:
    result = await ZScoreReranker(weights={"lexical": 2.0}).arerank("q", candidates(), top_n=2)
    assert [c["id"] for c in result.candidates] == ["b", "a"]
    assert [c["final_score"] for c in result.candidates] == pytest.approx(
        [-1 + 10 / S14, 1 - 8 / S14]
    )


async def test_zscore_flat_tier_scores_zero_and_a_miss_minus_one() -> None:
    cands = fuse_hits(
        {
            "dense": [hit("dense", "a", 2.0), hit("dense", "b", 2.0)],
            "lexical": [hit("lexical", "c", 7.0)],
        },
        method="rrf",
        cap=10,
    )
    result = await ZScoreReranker().arerank("q", cands, top_n=10)
    # dense flat: a=b=0, c misses it -> -1; lexical single hit: c=0, a and b miss it -> -1
    assert {c["id"]: c["final_score"] for c in result.candidates} == {
        "a": -1.0,
        "b": -1.0,
        "c": -1.0,
    }
    assert all(math.isfinite(c["final_score"]) for c in result.candidates)


async def test_zscore_caps_to_top_n_and_handles_empty_and_zero() -> None:
    floor = ZScoreReranker()
    assert [c["id"] for c in (await floor.arerank("q", candidates(), top_n=1)).candidates] == ["b"]
    assert (await floor.arerank("q", [], top_n=5)).candidates == []
    assert (await floor.arerank("q", candidates(), top_n=0)).candidates == []


async def test_zscore_falls_back_to_fusion_order_on_malformed_candidates() -> None:
    cands = candidates()
    broken = [*cands[:-1], {k: v for k, v in cands[-1].items() if k != "tier_z"}]
    result = await ZScoreReranker().arerank("q", broken, top_n=3)  # type: ignore[arg-type]
    assert result.method == "identity"
    assert result.error is not None and result.error.startswith("KeyError")
    assert [c["id"] for c in result.candidates] == [c["id"] for c in cands[:3]]
    assert result.detail == {"provider": "zscore", "fallback": "identity"}


async def test_identity_keeps_fusion_order_and_fused_score() -> None:
    cands = candidates()
    result = await IdentityReranker().arerank("q", cands, top_n=3)
    assert [c["id"] for c in result.candidates] == [c["id"] for c in cands[:3]]
    assert [c["final_score"] for c in result.candidates] == [c["fused_score"] for c in cands[:3]]
    assert result.method == "identity"


def test_sync_rerank_and_protocol() -> None:
    floor = ZScoreReranker()
    assert isinstance(floor, Reranker)
    assert isinstance(IdentityReranker(), Reranker)
    assert [c["id"] for c in floor.rerank("q", candidates(), top_n=2).candidates] == ["b", "a"]
