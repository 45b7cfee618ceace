"""Rocchio's second pass re-scores the first pass's candidates instead of scanning again."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from langchain_core.documents import Document

from ragtiller.core.tiers import SearchRequest
from ragtiller.index import DenseTier, EmbeddedIndex, ParentChildTier
from ragtiller.index import lexical as lexical_module
from ragtiller.index.ann import AnnIndex
from ragtiller.index.lexical import LexicalTier
from ragtiller.index.scans import SharedScans
from ragtiller.ingest import build_index
from ragtiller.models import HashingEmbedder
from ragtiller.policies.schema import FeedbackConfig
from ragtiller.ranking import feedback as feedback_module
from ragtiller.ranking.feedback import RocchioTier, rocchio_vector

EMBEDDER = HashingEmbedder(dim=64)
WORDS = [
    "wing",
    "flutter",
    "panel",
    "shock",
    "wave",
    "boundary",
    "layer",
    "heat",
    "transfer",
    "buckling",
    "nozzle",
    "jet",
]


@pytest.fixture(scope="module")
def index() -> EmbeddedIndex:
    docs = [
        Document(
            page_content=f"# Doc {i}\n\n"
            + " ".join(WORDS[(i * j) % len(WORDS)] for j in range(1, 9)),
            metadata={"source": f"d{i}.md", "tenant": "acme" if i % 3 else "globex"},
        )
        for i in range(40)
    ]
    return build_index(docs, embedder=EMBEDDER, progress=False)


def rocchio(tier: object, index: EmbeddedIndex, **config: object) -> RocchioTier:
    settings = FeedbackConfig.model_validate(
        {"dense": "rocchio", "dense_docs": 2, "dense_weight": 1.0, **config}
    )
    return RocchioTier(tier, index.store, settings)  # type: ignore[arg-type]


def request(text: str, **scope: object) -> SearchRequest:
    return SearchRequest(query=text, vector=EMBEDDER.embed_query(text), k=5, **scope)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["dense", "parent_child"])
def test_candidates_covering_the_scope_give_what_a_second_scan_gives(
    index: EmbeddedIndex, name: str
) -> None:
    tier = next(t for t in index.tiers if t.name == name)
    candidates = rocchio(tier, index, dense_candidates=1000)
    full = rocchio(tier, index, dense_rescore="full")
    assert candidates._rank_scored is not None and full._rank_scored is None
    for text in ("wing flutter", "shock wave heat", "nozzle"):
        for scope in ({}, {"filter": {"tenant": "acme"}}):
            got = candidates.search(request(text, **scope))
            want = full.search(request(text, **scope))
            assert [h["id"] for h in got] == [h["id"] for h in want]
            assert [h["score"] for h in got] == pytest.approx([h["score"] for h in want])


def test_the_second_pass_ranks_only_the_first_pass_candidates(index: EmbeddedIndex) -> None:
    dense = index.tiers[0]
    assert isinstance(dense, DenseTier)
    asked = request("wing flutter", filter={"tenant": "acme"})
    assert asked.vector is not None
    first = index.store.search_rows(asked.vector, 6, filter=asked.filter)
    hits = rocchio(dense, index, dense_candidates=6).search(asked)
    assert {h["id"] for h in hits} <= {index.store.records.ids[r] for r, _ in first}
    assert all(h["metadata"]["tenant"] == "acme" for h in hits)
    moved = rocchio_vector(asked.vector, index.store.vectors[[r for r, _ in first[:2]]], weight=1.0)
    rescored = sorted(
        ((float(index.store.vectors[r] @ moved), index.store.records.ids[r]) for r, _ in first),
        reverse=True,
    )
    assert [h["id"] for h in hits] == [i for _, i in rescored[:5]]
    assert {h["metadata"]["feedback"] for h in hits} == {"rocchio"}


def test_an_approximate_tier_searches_its_graph_again(index: EmbeddedIndex) -> None:
    store = index.store
    store.attach_ann(AnnIndex.build(store.vectors))
    try:
        dense = DenseTier(store, approximate=True)
        tier = rocchio(dense, index)
        assert tier.approximate and tier._rank_scored is None
        asked = request("shock wave")
        hits = tier.search(asked)
        assert asked.vector is not None
        first = store.search_rows(asked.vector, 2, approximate=True)
        moved = rocchio_vector(asked.vector, store.vectors[[r for r, _ in first]], weight=1.0)
        assert [h["id"] for h in hits] == [
            h["id"] for h in dense.search(replace(asked, vector=moved))
        ]
        parent_child = rocchio(ParentChildTier(store, index.parents, approximate=True), index)
        assert parent_child.search(asked)
    finally:
        store._ann = None


def test_the_turns_bm25_and_rocchios_first_pass_score_once(
    index: EmbeddedIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    lexical = index.tiers[2]
    assert isinstance(lexical, LexicalTier)
    calls: list[object] = []
    real = lexical_module.bm25_scores

    def counted(retriever: object, tokens: list[str], **options: Any) -> object:
        calls.append(tokens)
        return real(retriever, tokens, **options)  # type: ignore[arg-type]

    monkeypatch.setattr(lexical_module, "bm25_scores", counted)
    settings = FeedbackConfig(dense="rocchio", dense_docs=2, dense_source="fused")
    tier = RocchioTier(index.tiers[0], index.store, settings, lexical=lexical)
    asked = request("shock wave nozzle")
    short = lexical.search(replace(asked, k=3))
    tier.search(asked)  # its first pass asks BM25 for 100 hits of the same query
    assert len(calls) == 1
    assert lexical.search(replace(asked, k=100))[:3] == short  # the same ranking, any k


def test_the_dense_and_parent_child_wrappers_rescore_the_candidates_once(
    index: EmbeddedIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = FeedbackConfig(dense="rocchio", dense_docs=2, dense_source="fused")
    lexical = index.tiers[2]
    dense, parent_child = index.tiers[0], index.tiers[1]

    def wrap(tier: object, shared: SharedScans) -> RocchioTier:
        return RocchioTier(tier, index.store, settings, lexical=lexical, first_passes=shared)  # type: ignore[arg-type]

    alone = [wrap(t, SharedScans()) for t in (dense, parent_child)]
    shared = SharedScans()
    together = [wrap(t, shared) for t in (dense, parent_child)]
    rescored: list[int] = []
    real = feedback_module.candidate_cosines

    def counted(vectors: Any, rows: Any, query: Any) -> Any:
        rescored.append(len(rows))
        return real(vectors, rows, query)

    for text in ("wing flutter", "shock wave heat"):
        for scope in ({}, {"filter": {"tenant": "acme"}}):
            asked = request(text, **scope)
            want = [t.search(asked) for t in alone]
            monkeypatch.setattr(feedback_module, "candidate_cosines", counted)
            got = [t.search(asked) for t in together]
            monkeypatch.undo()
            assert got == want
    assert len(rescored) == 4  # once per query and scope, read by both wrappers
