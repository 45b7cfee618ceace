"""A passage one tier missed is fused at that tier's own score (``fusion.misses: exact``), and
z-scores take their scale from each tier's best hits (``fusion.scale_depth``).

Before, a passage one tier did not return was fused at that tier's lowest z, so the fusion, and
with it the top of the ranking, moved with how many hits each tier was asked for: a ``top_k:
10`` turn and an eval at ``--top-k 100`` ranked the same collection differently.
"""

from __future__ import annotations

from typing import Any

import pytest
from fixtures.fakes import StaticTier, hit
from fixtures.topics import threaded_and_resumed, topic_corpus
from langgraph.checkpoint.memory import InMemorySaver

from ragtiller import build_graph, load_policy
from ragtiller.core.tiers import QUERY_SCORE, Hit, Scored, SearchRequest
from ragtiller.eval.variants import with_overrides
from ragtiller.graph import tiers_for_policy
from ragtiller.index import EmbeddedIndex
from ragtiller.ingest import build_index
from ragtiller.models import HashingEmbedder
from ragtiller.ranking.feedback import RocchioTier
from ragtiller.ranking.fusion import fuse_hits, scaled_zscores, zscore_fusion, zscores
from ragtiller.ranking.passages import score_misses
from ragtiller.ranking.query_tiers import apply_query_options

EMBEDDER = HashingEmbedder(dim=128)
QUERY = "flutter of a heated panel near a shock"
EXACT = {"fusion.misses": "exact", "fusion.scale_depth": 6}


@pytest.fixture(scope="module")
def index() -> EmbeddedIndex:
    return build_index([*topic_corpus(), *topic_corpus("other")], embedder=EMBEDDER, progress=False)


def request(index: EmbeddedIndex, k: int = 100, namespaces: list[str] | None = None) -> Any:
    return SearchRequest(
        query=QUERY,
        vector=EMBEDDER.embed_query(QUERY),
        k=k,
        namespaces=namespaces or ["default"],
    )


def test_a_miss_is_fused_at_its_tiers_own_score_not_at_the_floor() -> None:
    scored = {"a": {"x": 3.0, "y": 2.0, "z": 1.0}, "b": {"y": 5.0, "z": 1.0}}
    floor = zscore_fusion(scored)
    exact = zscore_fusion(scored, extra={"b": {"x": 4.9}})
    b_z = dict(zip(["y", "z"], zscores([5.0, 1.0]), strict=True))
    assert floor["x"] == pytest.approx(zscores([3.0, 2.0, 1.0])[0] + min(b_z.values()))
    # x's own score in b stands just below y's: its z there is near y's, far above the floor
    assert exact["x"] == pytest.approx(zscores([3.0, 2.0, 1.0])[0] + (4.9 - 3.0) / 2.0)
    assert exact["x"] > exact["y"] > floor["x"]
    assert {k: v for k, v in exact.items() if k != "x"} == pytest.approx(
        {k: v for k, v in floor.items() if k != "x"}
    )


def test_without_scale_or_extra_the_z_scores_are_the_old_ones() -> None:
    scores = {"a": 0.9, "b": 0.5, "c": 0.1, "d": 0.05}
    assert list(scaled_zscores(scores)[0].values()) == zscores(list(scores.values()))
    z, _ = scaled_zscores(scores, scale=2)
    assert (z["a"], z["b"]) == pytest.approx(
        (1.0, -1.0)
    )  # the best two set the scale; the rest fall below
    assert z["d"] < z["c"] < -1.0


def test_candidates_keep_the_scaled_z_they_were_fused_with() -> None:
    hits = {
        "dense": [hit("dense", "a", 0.9), hit("dense", "b", 0.5), hit("dense", "c", 0.1)],
        "lexical": [hit("lexical", "c", 8.0), hit("lexical", "a", 2.0)],
    }
    out = fuse_hits(hits, method="zscore", cap=3, scale=2, extra={"lexical": {"b": 5.0}})
    by_id = {c["id"]: c for c in out}
    assert by_id["c"]["tier_z"]["dense"] == pytest.approx((0.1 - 0.7) / 0.2)
    assert by_id["b"]["fused_score"] == pytest.approx(-1.0 + (5.0 - 5.0) / 3.0)


@pytest.mark.parametrize("name", ["dense", "lexical"])
def test_an_embedded_tier_scores_given_chunks_as_its_search_does(
    index: EmbeddedIndex, name: str
) -> None:
    tier = next(t for t in tiers_for_policy(load_policy(), index) if t.name == name)
    found = tier.search(request(index))
    assert len(found) > 3
    scored = tier.score_ids(request(index), [h["id"] for h in found])  # type: ignore[attr-defined]
    assert {i: s.score for i, s in scored.items()} == pytest.approx(
        {h["id"]: h["score"] for h in found}, abs=1e-5
    )


@pytest.mark.parametrize("name", ["dense", "lexical"])
def test_a_tier_never_scores_a_chunk_outside_the_requests_scope(
    index: EmbeddedIndex, name: str
) -> None:
    tier = next(t for t in tiers_for_policy(load_policy(), index) if t.name == name)
    other = [h["id"] for h in tier.search(request(index, namespaces=["other"]))]
    assert other
    scored = tier.score_ids(request(index), [*other, "no-such-chunk"])  # type: ignore[attr-defined]
    assert scored == {}


def test_rocchio_scores_a_miss_with_the_moved_query_and_marks_the_questions_cosine(
    index: EmbeddedIndex,
) -> None:
    policy = load_policy()
    tiers = apply_query_options(policy, tiers_for_policy(policy, index), index)
    dense = next(t for t in tiers if t.name == "dense")
    assert isinstance(dense, RocchioTier)
    found = dense.search(request(index))
    scored = dense.score_ids(request(index), [h["id"] for h in found])
    assert set(scored) == {h["id"] for h in found}
    for h in found:
        got = scored[h["id"]]
        assert (got.score, got.question) == pytest.approx(
            (h["score"], h["metadata"][QUERY_SCORE]), abs=1e-5
        )


class Unscorable(StaticTier):
    def score_ids(self, request: SearchRequest, ids: list[str]) -> dict[str, Scored]:
        raise RuntimeError("scoring store down")


def test_a_tier_that_cannot_score_keeps_the_floor_and_the_turn_goes_on() -> None:
    hits: dict[str, list[Hit]] = {
        "dense": [hit("dense", "a", 0.9)],
        "lexical": [hit("lexical", "b", 3.0)],
        "remote": [hit("remote", "c", 1.0)],
    }
    tiers = {
        "dense": Unscorable("dense", hits["dense"]),
        "lexical": StaticTier("lexical", hits["lexical"], needs_vector=False),
        "remote": StaticTier("remote", hits["remote"]),
    }
    requests = {name: SearchRequest(query=QUERY, vector=None, k=3) for name in tiers}
    scored, report = score_misses(tiers, requests, hits)
    assert scored == {}
    assert report == {"dense": "failed: RuntimeError: scoring store down"}


def policy(**overrides: Any) -> Any:
    return with_overrides(load_policy(), {**EXACT, **overrides})


def documents(out: dict[str, Any]) -> list[tuple[str, str]]:
    return [(d.metadata["doc_id"], d.page_content) for d in out["documents"]]


SHALLOW = {
    "budgets.candidate_multiplier": 1,
    "budgets.candidate_floor": 1,
    "budgets.passages_per_document": 1,
    "fusion.scale_depth": 2,
}
"""Each tier asked for max_chunks hits, so a turn's depth is what it asks for."""


@pytest.mark.parametrize("misses", ["floor", "exact"])
def test_the_top_of_the_ranking_does_not_move_with_the_depth_asked_for(
    index: EmbeddedIndex, misses: str
) -> None:
    graph = build_graph(policy(**SHALLOW, **{"fusion.misses": misses}), index=index)
    top = {
        k: documents(graph.invoke({"query": QUERY}, context={"top_k": 2, "max_chunks": k}))
        for k in (2, 8)
    }
    assert len(top[2]) == 2
    if misses == "exact":
        assert top[2] == top[8][:2]
    else:  # the defect this fixes: the first two moved when more was asked for
        assert top[2] != top[8][:2]


def test_the_fuse_stage_says_what_each_tier_scored(index: EmbeddedIndex) -> None:
    fuse = next(
        s
        for s in build_graph(policy(), index=index).invoke({"query": QUERY})["stages"]
        if s["step"] == "fuse"
    )
    assert set(fuse["detail"]["misses"]) == {"dense", "lexical"}
    assert all(v.endswith("scored") for v in fuse["detail"]["misses"].values())


def test_exact_misses_on_a_thread_and_through_a_breakpoint_equal_a_plain_invoke(
    index: EmbeddedIndex,
) -> None:
    plain = build_graph(policy(), index=index).invoke({"query": QUERY})
    graph = build_graph(policy(), index=index, checkpointer=InMemorySaver())
    threaded, resumed = threaded_and_resumed(graph, QUERY)
    assert documents(threaded) == documents(resumed) == documents(plain)
    assert threaded["context"] == resumed["context"] == plain["context"]


def test_the_rows_of_a_turns_hits_are_found_without_an_id_map_of_every_row(
    index: EmbeddedIndex, tmp_path: Any
) -> None:
    index.save(tmp_path / "index")
    loaded = EmbeddedIndex.load(tmp_path / "index", embedder=EMBEDDER)
    tier = next(t for t in tiers_for_policy(load_policy(), loaded) if t.name == "lexical")
    found = tier.search(request(loaded))
    scored = tier.score_ids(request(loaded), [h["id"] for h in found])  # type: ignore[attr-defined]
    assert len(scored) == len(found)
    assert loaded.store.records._row is None  # no map of every id was built
