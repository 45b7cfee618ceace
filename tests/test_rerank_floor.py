"""The free floors: the z-score floor's narrowing of the fused passages, and the plain fusion order."""

from __future__ import annotations

from fixtures.fakes import hit

from ragtiller.core.tiers import Candidate
from ragtiller.ranking.fusion import fuse_hits
from ragtiller.rerankers import IdentityReranker, Reranker, ZScoreReranker


def candidates() -> list[Candidate]:
    """Fused passages of documents A (a1, a2) and B (b1), placed by the question's own fusion:
    b1 first, then a1 and a2."""
    fused = fuse_hits(
        {
            "dense": [hit("dense", "a1", 3.0, doc_id="A"), hit("dense", "a2", 2.0, doc_id="A")],
            "lexical": [hit("lexical", "b1", 10.0, doc_id="B")],
        },
        method="rrf",
        cap=10,
    )
    position = {"b1": 0, "a1": 1, "a2": 2}
    return [{**c, "position": position[c["id"]]} for c in fused]


async def test_zscore_narrows_documents_by_their_best_passage_into_the_questions_positions() -> (
    None
):
    cands = candidates()
    assert [c["id"] for c in cands] == ["a1", "b1", "a2"]  # the fused order (ties: dense first)
    result = await ZScoreReranker().arerank("q", cands, top_n=10)
    # A ranks first by its best passage and takes b1's position; B takes a1's
    assert [c["id"] for c in result.candidates] == ["a1", "b1", "a2"]
    assert [c["final_score"] for c in result.candidates] == [c["fused_score"] for c in cands]
    assert result.method == "zscore"
    assert result.error is None


async def test_zscore_caps_to_top_n_and_handles_empty_and_zero() -> None:
    floor = ZScoreReranker()
    assert [c["id"] for c in (await floor.arerank("q", candidates(), top_n=1)).candidates] == ["a1"]
    assert (await floor.arerank("q", [], top_n=5)).candidates == []
    assert (await floor.arerank("q", candidates(), top_n=0)).candidates == []


async def test_zscore_falls_back_to_fusion_order_on_malformed_candidates() -> None:
    cands = candidates()
    broken = [*cands[:-1], {k: v for k, v in cands[-1].items() if k != "fused_score"}]
    result = await ZScoreReranker().arerank("q", broken, top_n=3)  # type: ignore[arg-type]
    assert result.method == "identity"
    assert result.error is not None and result.error.startswith("KeyError")
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
    assert [c["id"] for c in floor.rerank("q", candidates(), top_n=2).candidates] == ["a1", "b1"]
