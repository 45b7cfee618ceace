"""Policy sections for ranking: the budgets, fusion and feedback the shipped recipe reads.

Every default here is the shipped default's value (``policies/shipped/default.yaml`` states only
its name and routes), so a policy that sets one field changes that field only.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from ragtiller.policies.schema_base import PolicyModel, Weight, build_field, turn_field

FEEDBACK_DEPTH = 100
"""Passages of each first pass Rocchio feedback reads (``ranking.feedback.FEEDBACK_DEPTH``)."""


class BudgetsConfig(PolicyModel):
    """Sizes: passages returned at most, the wide candidate pool after fusion, the context."""

    max_chunks: Annotated[
        int,
        Field(gt=0),
        turn_field(
            "In passages: the most one turn returns (caps top_k); also sizes the candidate cap."
        ),
    ] = 12
    passages_per_document: Annotated[
        int,
        Field(gt=0),
        turn_field(
            "In passages: the most one document contributes to the result (its best by the "
            "passage score, as Elasticsearch's collapse returns inner_hits)."
        ),
    ] = 5
    context_words: Annotated[
        int | None,
        Field(gt=0),
        turn_field(
            "In words (whitespace-separated; a CJK character is one, and a run without spaces "
            "one per 20 characters): the most text the turn's documents and context hold; "
            "passages past it are left out, and a label says so. None: no bound (evaluation "
            "at depth)."
        ),
    ] = 1500
    window_words: Annotated[
        int,
        Field(gt=0),
        build_field(
            "In words: the parent-child tier returns its best child with neighbouring children "
            "of the same section up to this size, never more of the section."
        ),
    ] = 300
    candidate_multiplier: Annotated[
        int,
        Field(gt=0),
        turn_field(
            "A factor: the candidate cap (hits asked of each tier, passages the rerank stage "
            "keeps) is max(this x max_chunks, candidate_floor)."
        ),
    ] = 3
    candidate_floor: Annotated[
        int,
        Field(gt=0),
        turn_field("In candidates: the candidate cap is never below this."),
    ] = 20
    max_query_chars: Annotated[
        int,
        Field(gt=0),
        turn_field("In characters: longer queries are truncated for routing and embedding."),
    ] = 4000

    @property
    def candidate_cap(self) -> int:
        """``max(candidate_multiplier x max_chunks, candidate_floor)``."""
        return max(self.candidate_multiplier * self.max_chunks, self.candidate_floor)


class FusionConfig(PolicyModel):
    """How tier results are merged (the passages; documents rank by their best passage)."""

    method: Annotated[
        Literal["rrf", "zscore", "minmax"],
        turn_field("rrf fuses ranks, zscore and minmax fuse normalised scores."),
    ] = "zscore"
    rrf_k: Annotated[
        int,
        Field(gt=0),
        turn_field(
            "A rank offset: rrf adds weight / (rrf_k + rank) per tier, rank from 1; larger flattens."
        ),
    ] = 60
    tier_weights: Annotated[
        dict[str, Weight],
        turn_field(
            "A weight per tier name or role (finite, >= 0; a tier not named weighs 1) in "
            "fusion; a tier weighed 0 is not searched while another tier is (a lexical tier "
            "still is: an exact match reads it)."
        ),
    ] = Field(default_factory=lambda: {"dense": 1.0, "lexical": 1.0, "parent_child": 0.0})


class FeedbackConfig(PolicyModel):
    """Zero-LLM pseudo-relevance feedback (Rocchio): the embedded dense tier searches again with
    the query vector moved toward the best passage of each top document of the dense and lexical
    first passes, fused as ``fusion`` fuses them."""

    dense_docs: Annotated[
        int,
        Field(gt=0),
        build_field("In documents: the fused first pass's top documents Rocchio averages."),
    ] = 2
    dense_weight: Annotated[
        float,
        Field(ge=0),
        build_field(
            "A weight: their mean vector's, beside the query vector's (1); 0: no feedback, the "
            "dense tier searches once."
        ),
    ] = 1.0

    @property
    def enabled(self) -> bool:
        """Whether Rocchio runs: a weight of 0 would move the vector nowhere."""
        return self.dense_weight > 0
