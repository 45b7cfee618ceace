"""Query-time ranking mechanisms: documents not chunks, section-level BM25, RM3 and Rocchio."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from fixtures.fakes import RaisingTier, StaticTier, hit
from langchain_core.documents import Document

from ragtiller.core.tiers import SearchRequest, Tier
from ragtiller.eval.variants import with_overrides
from ragtiller.index import EmbeddedIndex
from ragtiller.index.scans import SharedScans
from ragtiller.ingest import build_index
from ragtiller.models import HashingEmbedder
from ragtiller.policies import load_policy
from ragtiller.policies.schema import FeedbackConfig, FusionConfig
from ragtiller.ranking.documents import collapse_to_documents
from ragtiller.ranking.feedback import (
    FUSED_FIRST_PASS_DEPTH,
    RM3Tier,
    RocchioTier,
    fused_feedback,
    fused_feedback_rows,
    rm3_weights,
    rocchio_vector,
    top_agreement,
)
from ragtiller.ranking.fusion import fuse_hits
from ragtiller.ranking.query_tiers import apply_query_options, section_lexical_tier


def test_max_keeps_a_documents_best_chunk_and_sum_adds_them() -> None:
    hits = {
        "dense": [hit("dense", "a1", 0.9, doc_id="A"), hit("dense", "b1", 0.8, doc_id="B"),
                  hit("dense", "a2", 0.7, doc_id="A")],
    }  # fmt: skip
    by_max = collapse_to_documents(hits, "max")["dense"]
    assert [(h["id"], h["score"]) for h in by_max] == [("a1", 0.9), ("b1", 0.8)]
    by_sum = collapse_to_documents(hits, "sum")["dense"]
    assert [(h["id"], h["score"]) for h in by_sum] == [("a1", pytest.approx(1.6)), ("b1", 0.8)]
    assert collapse_to_documents(hits, "off") == {"dense": hits["dense"]}


def test_one_representative_per_document_across_tiers() -> None:
    # Lexical ranks chunk a2 first, dense ranks a1 second: a2 (rank 0) represents A in both.
    hits = {
        "dense": [hit("dense", "b1", 0.9, doc_id="B"), hit("dense", "a1", 0.8, doc_id="A")],
        "lexical": [hit("lexical", "a2", 7.0, doc_id="A")],
    }
    collapsed = collapse_to_documents(hits, "max")
    assert [h["id"] for h in collapsed["dense"]] == ["b1", "a2"]
    assert collapsed["dense"][1]["score"] == 0.8  # the tier keeps its own score
    fused = fuse_hits(collapsed, method="rrf", cap=10)
    assert [c["id"] for c in fused] == ["a2", "b1"]  # A: two votes; B: one
    assert fused[0]["tier_scores"] == {"dense": 0.8, "lexical": 7.0}


def test_documents_of_other_namespaces_stay_apart() -> None:
    hits = {"dense": [hit("dense", "x", 0.9, doc_id="D", namespace="n1"),
                      hit("dense", "y", 0.8, doc_id="D", namespace="n2")]}  # fmt: skip
    assert len(collapse_to_documents(hits, "max")["dense"]) == 2


def test_rm3_weights_hand_computed() -> None:
    # feedback model: doc1 (score 3) "flutter flutter wing" + doc2 (score 1) "panel"
    # P(flutter) = 3 * 2/3 = 2, P(wing) = 3 * 1/3 = 1, P(panel) = 1 * 1 = 1; top 2: flutter,
    # then panel (equal to wing, earlier in alphabet); renormalised 2/3, 1/3
    weights = rm3_weights(
        ["wing"],
        [(["flutter", "flutter", "wing"], 3.0), (["panel"], 1.0)],
        n_terms=2,
        original_weight=0.6,
    )
    assert weights == pytest.approx({"wing": 0.6, "flutter": 0.4 * 2 / 3, "panel": 0.4 / 3})
    assert sum(weights.values()) == pytest.approx(1.0)


def test_rocchio_moves_toward_the_feedback_mean_and_stays_unit() -> None:
    moved = rocchio_vector(
        [2.0, 0.0, 0.0], np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]), weight=1.0
    )
    assert np.linalg.norm(moved) == pytest.approx(1.0)
    assert moved == pytest.approx(list(np.array([1.0, 0.5, 0.5]) / np.linalg.norm([1, 0.5, 0.5])))


@pytest.fixture(scope="module")
def index() -> EmbeddedIndex:
    texts = {
        "wing": "Wing flutter. Flutter of a swept wing grows with speed; flutter margins shrink.",
        "panel": "Panel flutter. Supersonic panel flutter of thin plates and its damping.",
        "heat": "Heat transfer. Stagnation heat transfer in hypersonic flow at the nose.",
        "boundary": "Boundary layers. Laminar boundary layer transition on a flat plate. " * 3,
    }
    docs = [Document(page_content=t, metadata={"source": k}) for k, t in texts.items()]
    return build_index(docs, embedder=HashingEmbedder(dim=64), progress=False)


def test_rm3_expands_with_terms_of_the_first_pass(index: EmbeddedIndex) -> None:
    lexical = next(t for t in index.tiers if t.name == "lexical")
    plain = lexical.search(SearchRequest(query="swept wing", vector=None, k=4))
    assert [h["doc_id"] for h in plain] == ["wing"]  # only the wing doc has the query terms
    rm3 = RM3Tier(lexical, FeedbackConfig(lexical="rm3", lexical_docs=1, lexical_terms=5))  # type: ignore[arg-type]
    expanded = rm3.search(SearchRequest(query="swept wing", vector=None, k=4))
    # "flutter" comes from the wing doc and reaches the panel doc
    assert [h["doc_id"] for h in expanded] == ["wing", "panel"]
    assert all(h["metadata"]["feedback"] == "rm3" for h in expanded)


def test_rm3_failure_returns_the_first_pass_labelled(index: EmbeddedIndex) -> None:
    lexical = next(t for t in index.tiers if t.name == "lexical")

    class Broken(RM3Tier):
        def _second_pass(self, *args: object, **kwargs: object) -> list:  # type: ignore[override,type-arg]
            raise RuntimeError("boom")

    hits = Broken(lexical, FeedbackConfig(lexical="rm3")).search(  # type: ignore[arg-type]
        SearchRequest(query="swept wing", vector=None, k=3)
    )
    assert [h["doc_id"] for h in hits] == ["wing"]
    assert hits[0]["metadata"]["feedback"] == "failed: RuntimeError: boom"


def test_rocchio_searches_with_the_moved_vector(index: EmbeddedIndex) -> None:
    dense = next(t for t in index.tiers if t.name == "dense")
    store = dense.store  # type: ignore[attr-defined]
    vector = index.embedder.embed_query("flutter")
    tier = RocchioTier(
        dense, store, FeedbackConfig(dense="rocchio", dense_docs=1, dense_weight=1.0)
    )
    hits = tier.search(SearchRequest(query="flutter", vector=vector, k=2))
    top_row = store.search_rows(vector, 1)[0][0]
    moved = rocchio_vector(vector, store.vectors[[top_row]], weight=1.0)
    assert [h["id"] for h in hits] == [
        h["id"] for h in dense.search(SearchRequest(query="", vector=moved, k=2))
    ]
    assert hits[0]["metadata"]["feedback"] == "rocchio"


def recorded_lexical(lexical: Tier, query: str) -> StaticTier:
    """``lexical``'s own hits for ``query``, served by a tier that records each request."""
    hits = lexical.search(SearchRequest(query=query, vector=None, k=FUSED_FIRST_PASS_DEPTH))
    return StaticTier("lexical", hits, needs_vector=False)


def test_fused_feedback_takes_the_document_both_tiers_rank(index: EmbeddedIndex) -> None:
    # Only "wing" has the query terms, so BM25 returns it alone; dense ranks every document.
    # Under RRF a document in both lists outranks any document in one: "wing" is the top fused
    # document whatever rank dense gives it, and its best chunk is the feedback row.
    dense = next(t for t in index.tiers if t.name == "dense")
    lexical = next(t for t in index.tiers if t.name == "lexical")
    store = dense.store  # type: ignore[attr-defined]
    vector = index.embedder.embed_query("swept wing")
    request = SearchRequest(query="swept wing", vector=vector, k=4)
    rows = fused_feedback_rows(store, lexical, request, FusionConfig(), docs=1)
    assert [store.records.metadatas[r]["doc_id"] for r in rows] == ["wing"]
    two = fused_feedback_rows(store, lexical, request, FusionConfig(), docs=2)
    assert two[0] == rows[0] and len(two) == 2
    assert len({store.records.metadatas[r]["doc_id"] for r in two}) == 2  # one row per document
    elsewhere = SearchRequest(query="swept wing", vector=vector, k=4, namespaces=["nowhere"])
    assert fused_feedback_rows(store, lexical, elsewhere, FusionConfig(), docs=1) == []


def test_fused_rocchio_moves_toward_the_fused_top_document(index: EmbeddedIndex) -> None:
    dense = next(t for t in index.tiers if t.name == "dense")
    lexical = next(t for t in index.tiers if t.name == "lexical")
    store = dense.store  # type: ignore[attr-defined]
    config = FeedbackConfig(dense="rocchio", dense_docs=1, dense_weight=1.0, dense_source="fused")
    tier = RocchioTier(dense, store, config, lexical=lexical)
    vector = index.embedder.embed_query("swept wing")
    hits = tier.search(SearchRequest(query="swept wing", vector=vector, k=2))
    wing_row = next(r for r, md in enumerate(store.records.metadatas) if md["doc_id"] == "wing")
    moved = rocchio_vector(vector, store.vectors[[wing_row]], weight=1.0)
    expected = dense.search(SearchRequest(query="", vector=moved, k=2))
    assert [h["id"] for h in hits] == [h["id"] for h in expected]
    assert {h["metadata"]["feedback"] for h in hits} == {"rocchio-fused"}


def test_dense_and_parent_child_share_one_fused_first_pass(index: EmbeddedIndex) -> None:
    by_name = {t.name: t for t in index.tiers}
    lexical = recorded_lexical(by_name["lexical"], "swept wing")
    config = FeedbackConfig(dense="rocchio", dense_source="fused")
    store = by_name["dense"].store  # type: ignore[attr-defined]
    shared = SharedScans()  # what apply_query_options gives both wrappers of one graph
    vector = index.embedder.embed_query("swept wing")
    for name in ("dense", "parent_child"):
        tier = RocchioTier(by_name[name], store, config, lexical=lexical, first_passes=shared)
        tier.search(SearchRequest(query="swept wing", vector=vector, k=3))
    assert len(lexical.calls) == 1 and lexical.calls[0]["k"] == FUSED_FIRST_PASS_DEPTH  # not k


def test_a_changed_store_gets_a_new_fused_first_pass() -> None:
    docs = [Document(page_content=t, metadata={"source": t}) for t in ("wing flutter", "heat")]
    index = build_index(docs, embedder=HashingEmbedder(dim=32), progress=False)
    by_name = {t.name: t for t in index.tiers}
    lexical = recorded_lexical(by_name["lexical"], "wing")
    store = by_name["dense"].store  # type: ignore[attr-defined]
    config = FeedbackConfig(dense="rocchio", dense_source="fused")
    tier = RocchioTier(by_name["dense"], store, config, lexical=lexical)
    request = SearchRequest(query="wing", vector=index.embedder.embed_query("wing"), k=3)
    tier.search(request)
    tier.search(request)
    assert len(lexical.calls) == 1  # the same turn's first pass, kept
    store.add_texts(["wing panel"], metadatas=[{"doc_id": "panel", "source": "panel"}])
    hits = tier.search(request)
    assert len(lexical.calls) == 2  # rows kept for the old table never answer for the new one
    assert {h["metadata"]["feedback"] for h in hits} == {"rocchio-fused"}


def test_fused_rocchio_survives_a_failing_lexical_first_pass(index: EmbeddedIndex) -> None:
    dense = next(t for t in index.tiers if t.name == "dense")

    failing = RaisingTier("lexical", [], needs_vector=False)
    config = FeedbackConfig(dense="rocchio", dense_source="fused")
    tier = RocchioTier(dense, dense.store, config, lexical=failing)  # type: ignore[attr-defined]
    request = SearchRequest(query="flutter", vector=index.embedder.embed_query("flutter"), k=2)
    hits = tier.search(request)
    assert [h["id"] for h in hits] == [h["id"] for h in dense.search(request)]  # plain vector
    assert hits[0]["metadata"]["feedback"] == "failed: ConnectionError: lexical is down"


def test_section_lexical_scores_whole_sections(index: EmbeddedIndex) -> None:
    tier = section_lexical_tier(index)
    assert tier is section_lexical_tier(index)  # built once per index
    hits = tier.search(SearchRequest(query="flutter", vector=None, k=5))
    assert {h["doc_id"] for h in hits} == {"wing", "panel"}
    assert all(h["parent_id"] is None for h in hits)  # sections, like the parent-child tier
    assert {h["id"] for h in hits} <= set(index.parents.ids)


def test_policy_switches_wrap_only_what_they_name(index: EmbeddedIndex) -> None:
    plain = {
        "feedback.dense": "off",
        "feedback.dense_source": "tier",
        "feedback.lexical": "off",
        "fusion.lexical_unit": "chunk",
    }
    base = with_overrides(load_policy(), plain)
    assert apply_query_options(base, index.tiers, index) == index.tiers
    policy = with_overrides(
        base,
        {"fusion.lexical_unit": "section", "feedback.lexical": "rm3", "feedback.dense": "rocchio"},
    )
    tiers = {t.name: t for t in apply_query_options(policy, index.tiers, index)}
    assert isinstance(tiers["lexical"], RM3Tier)
    assert tiers["lexical"].inner is section_lexical_tier(index)
    assert isinstance(tiers["dense"], RocchioTier)
    assert isinstance(tiers["parent_child"], RocchioTier)
    assert tiers["dense"].lexical is None  # dense_source: tier, its own first pass
    fused = with_overrides(policy, {"feedback.dense_source": "fused"})
    by_name = {t.name: t for t in apply_query_options(fused, index.tiers, index)}
    for name in ("dense", "parent_child"):
        assert by_name[name].lexical is by_name["lexical"]  # type: ignore[attr-defined]
        assert by_name[name].label == "rocchio-fused"  # type: ignore[attr-defined]
    assert by_name["dense"].first_passes is by_name["parent_child"].first_passes  # type: ignore[attr-defined]
    # without an index (tiers passed by hand) there are no sections: the lexical tier stays
    no_index = {t.name: t for t in apply_query_options(policy, index.tiers, None)}
    assert no_index["lexical"].inner is next(t for t in index.tiers if t.name == "lexical")  # type: ignore[attr-defined]


def test_top_agreement_is_the_shared_share_of_the_top_ten() -> None:
    docs = [("", f"d{i}") for i in range(20)]
    assert top_agreement(docs, docs) == 1.0
    assert top_agreement(docs[:10], docs[10:]) == 0.0
    assert top_agreement(docs[:10], docs[5:15]) == 0.5
    assert top_agreement(docs[:4], docs[2:]) == 0.5  # compared at the shorter list's length
    assert top_agreement([], docs) == 0.0


def test_agreement_strength_gives_no_move_when_the_tiers_disagree(index: EmbeddedIndex) -> None:
    # BM25 ranks only documents dense does not reach at all, so the first passes share none
    # of their top documents: Rocchio by agreement does not move the query, fixed does.
    dense = next(t for t in index.tiers if t.name == "dense")
    store = dense.store  # type: ignore[attr-defined]
    vector = index.embedder.embed_query("swept wing")
    request = SearchRequest(query="swept wing", vector=vector, k=2)
    plain = [(h["id"], h["score"]) for h in dense.search(request)]
    elsewhere = StaticTier(
        "lexical", [hit("lexical", "x", 9.0, doc_id="nowhere")], needs_vector=False
    )
    agreement = FeedbackConfig(
        dense="rocchio", dense_docs=1, dense_weight=5.0, dense_source="fused",
        dense_strength="agreement",
    )  # fmt: skip
    tier = RocchioTier(dense, store, agreement, lexical=elsewhere)
    assert [(h["id"], h["score"]) for h in tier.search(request)] == plain
    rows, share = fused_feedback(store, elsewhere, request, FusionConfig(), docs=1)
    assert share == 0.0 and rows  # feedback was there to take; the weight made it nothing
    fixed = RocchioTier(dense, store, agreement.model_copy(update={"dense_strength": "fixed"}),
                        lexical=elsewhere)  # fmt: skip
    moved = rocchio_vector(vector, store.vectors[rows], weight=5.0)
    expected = [(h["id"], h["score"]) for h in dense.search(replace(request, vector=moved))]
    assert expected != plain  # the fixed weight moves the query: scores change
    assert [(h["id"], h["score"]) for h in fixed.search(request)] == expected
