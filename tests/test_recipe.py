"""The shipped ranking, step by step, on hand-made candidate tables; and the stage story a
default turn tells (fuse widens and reports its feedback, rerank narrows with the floor)."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import numpy as np
import pytest
from fixtures.fakes import hit
from langchain_core.documents import Document

from ragtiller import build_graph, load_policy
from ragtiller.core.tiers import Candidate, Hit
from ragtiller.eval.variants import with_overrides
from ragtiller.ingest import build_index
from ragtiller.models import HashingEmbedder
from ragtiller.ranking import recipe
from ragtiller.ranking.recipe import (
    FEEDBACK_DEPTH,
    CandidateTable,
    feedback_passages,
    interleave,
    rocchio_vector,
)

HOW: dict[str, Any] = {"method": "zscore", "rrf_k": 60, "weights": None}


def h(tier: str, id_: str, score: float, doc: str | None = None) -> Hit:
    return hit(tier, id_, score, doc_id=doc or id_[0].upper())


def test_the_table_lists_each_passage_and_document_once_in_tier_order() -> None:
    table = CandidateTable(
        {
            "dense": [h("dense", "a1", 0.9), h("dense", "b1", 0.8)],
            "lexical": [h("lexical", "b1", 5.0), h("lexical", "c1", 4.0), h("lexical", "a2", 1.0)],
        }
    )
    assert table.ids == ["a1", "b1", "c1", "a2"]
    assert table.documents == [("", "A"), ("", "B"), ("", "C")]
    assert {t: [x["id"] for x in hits] for t, hits in table.head(1).tiers.items()} == {
        "dense": ["a1"],
        "lexical": ["b1"],
    }


def test_at_question_rescores_only_the_moved_tier_and_resorts_it() -> None:
    table = CandidateTable(
        {
            "dense": [h("dense", "a1", 0.9), h("dense", "b1", 0.8)],
            "lexical": [h("lexical", "a1", 3)],
        }
    ).moved("dense", [h("dense", "a1", 0.9), h("dense", "b1", 0.8)], {"a1": 0.1, "b1": 0.5})
    asked = table.at_question()
    assert [(x["id"], x["score"]) for x in asked["dense"]] == [("b1", 0.5), ("a1", 0.1)]
    assert [(x["id"], x["score"]) for x in asked["lexical"]] == [("a1", 3)]  # not the moved tier
    assert table.tiers["dense"][0]["score"] == 0.9  # the table itself is unchanged


def test_fuse_keeps_every_passage_and_place_ranks_them_by_the_question() -> None:
    dense = [h("dense", "a1", 0.9), h("dense", "a2", 0.85), h("dense", "b1", 0.2)]
    table = CandidateTable({"dense": dense, "lexical": [h("lexical", "c1", 2.0)]})
    fused = recipe.fuse(table, **HOW)
    assert sorted(c["id"] for c in fused) == ["a1", "a2", "b1", "c1"]
    assert [c["position"] for c in recipe.place(table, fused, **HOW)] == [0, 1, 2, 3]
    moved = table.moved("dense", dense, {"a1": 0.1, "a2": 0.2, "b1": 0.9})
    placed = recipe.place(moved, recipe.fuse(moved, **HOW), **HOW)
    by_id = {c["id"]: c["position"] for c in placed}
    assert by_id["b1"] < by_id["a2"] < by_id["a1"]  # the question's own order
    assert [c["id"] for c in placed][:2] == ["a1", "a2"]  # the fused order stands


def test_narrow_ranks_documents_by_their_best_passage_and_keeps_the_questions_positions() -> None:
    def c(id_: str, score: float, position: int) -> Candidate:
        return Candidate(
            id=id_, text=id_, doc_id=id_[0].upper(), parent_id=None, source="", metadata={},
            tier_scores={}, tier_ranks={}, tier_z={}, fused_score=score, position=position,
        )  # fmt: skip

    # A has the best fused passage; the question's own fusion puts B's passage first, so the
    # pattern of positions is B A A C: A (first by its best passage) enters at its own first
    # position and keeps both of its positions, B enters after it, C keeps its own
    fused = [c("a1", 3.0, 1), c("a2", 2.5, 2), c("b1", 2.0, 0), c("c1", 1.0, 3)]
    assert [x["id"] for x in recipe.narrow(fused, 4)] == ["a1", "b1", "a2", "c1"]
    assert [x["id"] for x in recipe.narrow(fused, 2)] == ["a1", "b1"]
    assert recipe.narrow([], 3) == []


def test_passage_keys_add_the_coverage_only_when_every_leading_passage_has_one() -> None:
    head: list[Any] = [
        {"id": "a", "fused_score": 2.0, "metadata": {recipe.RESCORE: 0.0}},
        {"id": "b", "fused_score": 1.0, "metadata": {recipe.RESCORE: 1.0}},
    ]
    assert recipe.passage_keys(head) == {"a": 0.0, "b": 0.0}
    head[1]["metadata"] = {}
    assert recipe.passage_keys(head) == {"a": 1.0, "b": -1.0}


def test_feedback_reads_the_best_dense_passage_of_the_top_fused_documents() -> None:
    dense = [h("dense", "a1", 0.9), h("dense", "b1", 0.8), h("dense", "a2", 0.7)]
    lexical = [h("lexical", "b2", 9.0), h("lexical", "c1", 1.0)]
    table = CandidateTable({"dense": dense, "lexical": lexical})
    args: dict[str, Any] = {"method": "rrf", "rrf_k": 60, "weights": None}
    # B: dense rank 2 and lexical rank 1 beats A: dense rank 1 only; C has no dense passage
    assert feedback_passages(table, "dense", "lexical", docs=3, **args) == ["b1", "a1"]
    assert feedback_passages(table, "dense", None, docs=1, **args) == ["a1"]


def test_feedback_reads_each_first_pass_to_its_depth_only() -> None:
    dense = [h("dense", f"d{i}", 1.0 - i / 1000, doc=f"D{i}") for i in range(FEEDBACK_DEPTH + 5)]
    table = CandidateTable({"dense": dense, "lexical": [h("lexical", "d104", 9.0, doc="D104")]})
    picked = feedback_passages(table, "dense", "lexical", docs=1, method="rrf", rrf_k=60,
                               weights=None)  # fmt: skip
    assert picked == ["d0"]  # D104 is past the dense first pass's depth: no passage to read


TIES = """
from fixtures.fakes import hit
from ragtiller.ranking.recipe import feedback_passages
from ragtiller.ranking.recipe import CandidateTable
docs = [f"doc{i}" for i in range(12)]
dense = [hit("dense", f"{d}-p", 0.5, doc_id=d) for d in docs]
lexical = [hit("lexical", f"{d}-q", 2.0, doc_id=d) for d in reversed(docs)]
table = CandidateTable({"dense": dense, "lexical": lexical})
print(feedback_passages(table, "dense", "lexical", docs=3, method="zscore", rrf_k=60, weights=None))
"""


def test_tied_documents_give_the_same_feedback_whatever_the_hash_seed() -> None:
    outs = set()
    for seed in ("1", "2", "3"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run(
            [sys.executable, "-c", TIES], env=env, capture_output=True, text=True, check=True,
            cwd=os.path.dirname(__file__),
        )  # fmt: skip
        outs.add(done.stdout)
    assert len(outs) == 1, outs


def test_rocchio_moves_toward_the_feedback_mean_and_stays_unit() -> None:
    moved = np.asarray(rocchio_vector([1.0, 0.0, 0.0], np.array([[0.0, 1.0, 0.0]]), weight=0.5))
    assert np.linalg.norm(moved) == pytest.approx(1.0)
    assert moved[1] > 0 and moved[0] > moved[1]
    assert rocchio_vector([2.0, 0.0], np.array([[0.0, 1.0]]), weight=0.0) == [1.0, 0.0]


# --- the stage story of a default turn -----------------------------------------------------


QUESTION = "which panel flutters at wing 3?"


@pytest.fixture(scope="module")
def index() -> Any:
    docs = [
        Document(page_content=f"Topic {i}: wing flutter panel {i}. " * 5, metadata={"source": f"{i}.md"})
        for i in range(8)
    ]  # fmt: skip
    return build_index(docs, embedder=HashingEmbedder(64), progress=False)


def stage(out: dict[str, Any], step: str) -> Any:
    return next(s for s in out["stages"] if s["step"] == step)


def test_a_default_turn_fuses_with_feedback_and_the_rerank_floor_narrows(index: Any) -> None:
    out = build_graph(load_policy(), index=index).invoke({"query": QUESTION})
    fuse, rerank = stage(out, "fuse"), stage(out, "rerank")
    assert fuse["status"] == "done" and fuse["detail"]["feedback"] == "rocchio: 2 documents"
    assert fuse["detail"]["candidates"] > len(out["documents"]) > 0  # fuse widens
    assert (rerank["status"], rerank["detail"]["method"]) == ("done", "zscore")  # rerank narrows


def test_feedback_off_searches_once(index: Any) -> None:
    policy = with_overrides(load_policy(), {"feedback.dense_weight": 0.0})
    out = build_graph(policy, index=index).invoke({"query": QUESTION})
    assert stage(out, "fuse")["detail"]["feedback"] == "off"
    assert stage(out, "rerank")["detail"]["method"] == "zscore"


def test_a_document_keeps_the_positions_its_own_passages_earned() -> None:
    """Issue 44, item 4: feedback ranked `topics/calls` above `topics/typesmapping`, whose
    KeyError passages held four of the question's first five positions; the first-ranked
    document took those positions and filled them with its own weak passages."""

    def c(id_: str) -> Candidate:
        return Candidate(
            id=id_, text=id_, doc_id=id_[0].upper(), parent_id=None, source="", metadata={},
            tier_scores={}, tier_ranks={}, tier_z={}, fused_score=0.0, position=0,
        )  # fmt: skip

    passages = [c("b1"), c("b2"), c("a1"), c("b3"), c("a2"), c("a3")]
    order = interleave(passages, [("", "A"), ("", "B")])
    assert [p["id"] for p in order] == ["a1", "b1", "b2", "b3", "a2", "a3"]
