"""Documents vote with whole paragraphs (``fusion.document_unit``), feedback reads them
(``feedback.dense_vectors``), and the question picks the passage (``feedback.passage_scores``).

Regression for issue 26's "a document representation that does not depend on how a document
happens to be chunked": a one-paragraph abstract longer than ``chunk_tokens`` was cut into two
passages and ranked by the better half of it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from fixtures.fakes import hit
from langchain_core.documents import Document

from ragtiller import build_graph
from ragtiller.core.tiers import QUERY_SCORE, SearchRequest
from ragtiller.eval.variants import with_overrides
from ragtiller.graph.builder import build_components
from ragtiller.index import ChunkingConfig, EmbeddedIndex
from ragtiller.ingest import build_index
from ragtiller.models import HashingEmbedder
from ragtiller.models.batch_embedding import normalize_rows
from ragtiller.policies import load_policy
from ragtiller.policies.schema import FeedbackConfig, FusionConfig
from ragtiller.ranking.feedback import RocchioTier, rocchio_vector
from ragtiller.ranking.passages import rank_passages
from ragtiller.ranking.units import (
    UNIT_ID,
    UNIT_SCORE,
    DenseUnitsTier,
    LexicalUnitsTier,
    index_units,
    unit_document_order,
)

EMBEDDER = HashingEmbedder(dim=128)
CHUNKING = ChunkingConfig(chunk_tokens=20, overlap_tokens=4)


def sentence(i: int, word: str) -> str:
    return f"Filler{i} words{i} about{i} {word} here{i} now{i}."


# One paragraph of 36 words: cut into pieces at sentence ends. "alpha" is in its first
# sentence, "omega" in its last, so no one piece holds both.
LONG = " ".join(
    [sentence(0, "alpha")] + [sentence(i, f"mid{i}") for i in range(1, 5)] + [sentence(5, "omega")]
)
SHORT_A = "A second paragraph, short, about something else entirely here and there."
PAD = " ".join(f"pad{i}" for i in range(8))
SHORT_B = f"Alpha is named here. {PAD}"
SHORT_C = f"Omega is named here. {PAD}"
QUERY = "find alpha with omega"


@pytest.fixture(scope="module")
def index() -> EmbeddedIndex:
    docs = [
        Document(page_content=f"{LONG}\n\n{SHORT_A}", metadata={"source": "long.md"}),
        Document(page_content=SHORT_B, metadata={"source": "short.md"}),
        Document(page_content=SHORT_C, metadata={"source": "omega.md"}),
    ]
    return build_index(docs, embedder=EMBEDDER, chunking=CHUNKING, progress=False)


def rows_of(index: EmbeddedIndex, source: str) -> list[int]:
    records = index.store.records
    return [r for r, md in enumerate(records.metadatas) if md["source"] == source]


def test_the_pieces_of_one_paragraph_are_one_unit_and_paragraphs_are_not(
    index: EmbeddedIndex,
) -> None:
    units = index_units(index, "paragraph")
    records = index.store.records
    long_rows = rows_of(index, "long.md")
    pieces = [r for r in long_rows if SHORT_A not in records.texts[r]]
    assert len(pieces) >= 2  # the long paragraph was cut
    assert len({int(units.of_row[r]) for r in pieces}) == 1
    other = next(r for r in long_rows if records.texts[r] == SHORT_A)
    assert units.of_row[other] != units.of_row[pieces[0]]
    unit_text = units.lexical.records.texts[int(units.of_row[pieces[0]])]
    assert unit_text == LONG  # the paragraph's span, overlaps counted once
    section = index_units(index, "section")
    assert len({int(section.of_row[r]) for r in long_rows}) == 1


def test_units_follow_ingests_paragraphs_in_a_text_with_one_paragraph_per_line() -> None:
    doc = Document(page_content=f"{LONG}\n{SHORT_A}", metadata={"source": "lines.md"})
    index = build_index([doc], embedder=EMBEDDER, chunking=CHUNKING, progress=False)
    records = index.store.records
    assert SHORT_A in records.texts  # ingest ended the long paragraph at its line end
    units = index_units(index, "paragraph")
    other = records.texts.index(SHORT_A)
    pieces = [r for r in range(len(records)) if r != other]
    assert len(pieces) >= 2 and len({int(units.of_row[r]) for r in pieces}) == 1
    assert units.of_row[other] != units.of_row[pieces[0]]


def test_a_unit_vector_is_the_mean_of_its_passages(index: EmbeddedIndex) -> None:
    units = index_units(index, "paragraph")
    records = index.store.records
    pieces = [r for r in rows_of(index, "long.md") if SHORT_A not in records.texts[r]]
    mean = normalize_rows(np.asarray(index.store.vectors[pieces], dtype=np.float64).mean(axis=0))
    assert units.vectors_of_rows([pieces[0]])[0] == pytest.approx(mean[0], abs=1e-6)
    lone = rows_of(index, "short.md")[0]
    assert units.vectors_of_rows([lone])[0] == pytest.approx(index.store.vectors[lone], abs=1e-6)


def test_passages_carry_their_whole_paragraphs_scores(index: EmbeddedIndex) -> None:
    units = index_units(index, "paragraph")
    records = index.store.records
    lexical = next(t for t in index.tiers if t.name == "lexical")
    request = SearchRequest(query=QUERY, vector=EMBEDDER.embed_query(QUERY), k=10)
    hits = LexicalUnitsTier(lexical, units, records).search(request)
    pieces = [h for h in hits if h["doc_id"] == "long.md" and SHORT_A not in h["text"]]
    assert len(pieces) >= 2 and len({h["metadata"][UNIT_ID] for h in pieces}) == 1
    whole = units.lexical.row_scores(request)[units.ids.index(pieces[0]["metadata"][UNIT_ID])]
    assert whole > 0 and all(h["metadata"][UNIT_SCORE] == pytest.approx(whole) for h in pieces)
    assert [h["id"] for h in hits] == [h["id"] for h in lexical.search(request)]  # order kept
    dense = next(t for t in index.tiers if t.name == "dense")
    for h in DenseUnitsTier(dense, units, index.store).search(request):
        vector = units.centroids[units.ids.index(h["metadata"][UNIT_ID])]
        query = normalize_rows(request.vector)[0]  # type: ignore[arg-type]
        assert h["metadata"][UNIT_SCORE] == pytest.approx(float(vector @ query), abs=1e-6)


def lexical_only(**fields: Any) -> Any:
    overrides = {
        "fusion.tier_weights": {"dense": 0.0, "lexical": 1.0, "parent_child": 0.0},
        "feedback.dense": "off",
        **fields,
    }
    return with_overrides(load_policy(), overrides)


def test_the_document_whose_paragraph_holds_the_query_ranks_first(index: EmbeddedIndex) -> None:
    query: Any = {"query": QUERY}
    by_unit = build_graph(lexical_only(**{"fusion.document_unit": "paragraph"}), index=index)
    context: Any = {"top_k": 3}
    out = by_unit.invoke(query, context=context)
    assert out["documents"][0].metadata["source"] == "long.md"
    assert all(len(d.page_content.split()) <= CHUNKING.chunk_tokens for d in out["documents"])
    assert all(d.page_content != LONG for d in out["documents"])  # passages, never the unit
    by_passage = build_graph(lexical_only(**{"fusion.document_unit": "passage"}), index=index)
    first = by_passage.invoke(query, context=context)["documents"][0]
    assert first.metadata["source"] in {"short.md", "omega.md"}  # a short note beats a half


def test_documents_rank_by_their_best_fused_unit_with_deterministic_ties() -> None:
    def unit_hit(tier: str, id_: str, score: float, unit: str, unit_score: float, doc: str) -> Any:
        return hit(tier, id_, score, "", doc_id=doc, **{UNIT_ID: unit, UNIT_SCORE: unit_score})

    hits = {
        "lexical": [
            unit_hit("lexical", "b1", 9.0, "ub", 9.0, "B"),
            unit_hit("lexical", "a1", 5.0, "ua", 12.0, "A"),
            unit_hit("lexical", "a2", 4.0, "ua", 12.0, "A"),
            unit_hit("lexical", "c1", 1.0, "uc", 1.0, "C"),
        ]
    }
    order = unit_document_order(hits, method="zscore", rrf_k=60, weights=None)
    assert [d for _, d in order] == ["A", "B", "C"]
    tied = {
        "dense": [hit("dense", "y", 1.0, doc_id="Y"), hit("dense", "x", 1.0, doc_id="X")],
        "lexical": [hit("lexical", "x", 1.0, doc_id="X"), hit("lexical", "y", 1.0, doc_id="Y")],
    }
    for _ in range(3):  # set order once decided ties: best rank, then id, now
        assert unit_document_order(tied, method="zscore", rrf_k=60, weights=None) == [
            ("", "X"),
            ("", "Y"),
        ]


def test_rocchio_averages_paragraph_vectors_with_dense_vectors_paragraph(
    index: EmbeddedIndex,
) -> None:
    units = index_units(index, "paragraph")
    dense = next(t for t in index.tiers if t.name == "dense")
    config = FeedbackConfig(dense="rocchio", dense_docs=1, dense_weight=1.0)
    vector = EMBEDDER.embed_query("alpha filler0 words0")
    request = SearchRequest(query="alpha", vector=vector, k=5)
    plain = RocchioTier(dense, index.store, config)
    by_unit = RocchioTier(dense, index.store, config, unit_vectors=units.vectors_of_rows)
    rows = [r for r, _ in index.store.search_rows(vector, 1)]
    moved = rocchio_vector(vector, units.vectors_of_rows(rows), weight=1.0)
    expected = [h["id"] for h in dense.search(SearchRequest(query="alpha", vector=moved, k=5))]
    assert [h["id"] for h in by_unit.search(request)] == expected
    assert units.vectors_of_rows(rows)[0] != pytest.approx(index.store.vectors[rows[0]], abs=1e-3)
    assert [h["score"] for h in by_unit.search(request)] != [
        h["score"] for h in plain.search(request)
    ]


def test_the_policy_fields_wire_the_wrappers(index: EmbeddedIndex) -> None:
    policy = with_overrides(
        load_policy(),
        {"fusion.document_unit": "paragraph", "feedback.dense_vectors": "paragraph"},
    )
    tiers = build_components(policy, index=index).tiers
    assert isinstance(tiers["lexical"], LexicalUnitsTier)
    assert isinstance(tiers["dense"], RocchioTier) and tiers["dense"].unit_vectors is not None
    assert isinstance(tiers["dense"].inner, DenseUnitsTier)  # the moved vector scores units
    plain = with_overrides(
        load_policy(), {"fusion.document_unit": "passage", "feedback.dense_vectors": "passage"}
    )
    tiers = build_components(plain, index=index).tiers
    assert not isinstance(tiers["lexical"], LexicalUnitsTier)
    assert isinstance(tiers["dense"], RocchioTier) and tiers["dense"].unit_vectors is None
    assert not isinstance(tiers["dense"].inner, DenseUnitsTier)


@pytest.mark.parametrize("field", ["passage_scores", "passage_positions"])
def test_the_question_fields_mark_each_moved_hit_with_its_question_cosine(
    index: EmbeddedIndex, field: str
) -> None:
    dense = next(t for t in index.tiers if t.name == "dense")
    config = FeedbackConfig.model_validate(
        {"dense": "rocchio", "dense_docs": 2, "dense_weight": 1.0, field: "query"}
    )
    vector = EMBEDDER.embed_query("alpha note")
    hits = RocchioTier(dense, index.store, config).search(
        SearchRequest(query="alpha note", vector=vector, k=5)
    )
    query = normalize_rows(vector)[0]
    for h in hits:
        row = index.store.records.row(h["id"])
        assert row is not None
        expected = float(np.asarray(index.store.vectors[row]) @ query)
        assert h["metadata"][QUERY_SCORE] == pytest.approx(expected, abs=1e-5)
        assert h["metadata"][QUERY_SCORE] != pytest.approx(h["score"], abs=1e-6)


@pytest.mark.parametrize("field", ["passage_scores", "passage_positions"])
def test_paragraph_units_keep_the_question_marks_and_the_candidate_rescore(
    index: EmbeddedIndex, field: str
) -> None:
    """Regression: with ``document_unit: paragraph`` Rocchio wraps the units tier, which took no
    ``question``; the question fields were silently ignored and the second pass scanned again."""
    policy = with_overrides(
        load_policy(),
        {"fusion.document_unit": "paragraph", f"feedback.{field}": "query"},
    )
    dense = build_components(policy, index=index).tiers["dense"]
    assert isinstance(dense, RocchioTier) and isinstance(dense.inner, DenseUnitsTier)
    assert dense._rank_scored is not None  # the moved query re-scores the first pass's rows
    vector = EMBEDDER.embed_query("alpha note")
    hits = dense.search(SearchRequest(query="alpha note", vector=vector, k=5))
    query = normalize_rows(vector)[0]
    assert hits
    for h in hits:
        row = index.store.records.row(h["id"])
        assert row is not None
        expected = float(np.asarray(index.store.vectors[row]) @ query)
        assert h["metadata"][QUERY_SCORE] == pytest.approx(expected, abs=1e-5)
        assert UNIT_SCORE in h["metadata"]


def moved_hit(id_: str, score: float, question: float, doc: str) -> Any:
    """A dense hit scored by the moved (feedback) query, marked with the question's own score."""
    return hit("dense", id_, score, "", doc_id=doc, **{QUERY_SCORE: question})


def test_the_question_orders_a_documents_passages_and_the_documents_stay() -> None:
    hits = {
        "dense": [
            moved_hit("a1", 0.9, 0.2, "A"),  # feedback pulled a1 up; the question prefers a2
            moved_hit("b1", 0.8, 0.7, "B"),
            moved_hit("a2", 0.7, 0.9, "A"),
        ]
    }
    config = FusionConfig(method="zscore", doc_aggregation="max")
    out = rank_passages(hits, config, cap=10, query="q", order="query")
    assert [c["id"] for c in out] == ["a2", "b1", "a1"]  # A keeps positions 1 and 3
    # the fields decide, not the marks: by default the moved scores order them
    assert [c["id"] for c in rank_passages(hits, config, cap=10, query="q")] == ["a1", "b1", "a2"]
    unmarked = {
        "dense": [hit("dense", h["id"], h["score"], doc_id=h["doc_id"]) for h in hits["dense"]]
    }
    assert [c["id"] for c in rank_passages(unmarked, config, cap=10, query="q")] == [
        "a1",
        "b1",
        "a2",
    ]


def test_the_question_places_the_passages_and_feedback_ranks_the_documents() -> None:
    # Feedback pulled A's second passage above B's; the question puts B's passage second.
    hits = {
        "dense": [
            moved_hit("a1", 0.9, 0.6, "A"),
            moved_hit("a2", 0.85, 0.2, "A"),
            moved_hit("b1", 0.8, 0.9, "B"),
        ]
    }
    config = FusionConfig(method="zscore", doc_aggregation="max")
    out = rank_passages(hits, config, cap=10, query="q", positions="query")
    # The question's order B, A, A sets the positions; feedback's document order (A first)
    # says who holds them.
    assert [c["id"] for c in out] == ["a1", "b1", "a2"]
    unmarked = {
        "dense": [hit("dense", h["id"], h["score"], doc_id=h["doc_id"]) for h in hits["dense"]]
    }
    assert [c["id"] for c in rank_passages(unmarked, config, cap=10, query="q")] == [
        "a1",
        "a2",
        "b1",
    ]


def test_the_question_places_and_feedback_orders_when_only_positions_read_the_question() -> None:
    # Under feedback A's passages lead (a1, a2, b1); the question prefers b1, then a2, then a1.
    hits = {
        "dense": [
            moved_hit("a1", 0.9, 0.5, "A"),
            moved_hit("a2", 0.85, 0.6, "A"),
            moved_hit("b1", 0.8, 0.9, "B"),
        ]
    }
    config = FusionConfig(method="zscore", doc_aggregation="max")

    def ids(**fields: Any) -> list[str]:
        return [c["id"] for c in rank_passages(hits, config, cap=10, query="q", **fields)]

    assert ids() == ["a1", "a2", "b1"]  # feedback gives A the first two positions
    # the question's order (B, A, A) gives A one leading position; feedback picks a1 for it
    assert ids(positions="query") == ["a1", "b1", "a2"]
    assert ids(positions="query", order="query") == ["a2", "b1", "a1"]
