"""The retrieval policy: a versioned, validated artifact that drives the graph's edges."""

from __future__ import annotations

from datetime import date
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

Toggle = bool | Literal["conditional"]
"""A stage switch: always on, always off, or decided per query (each decision carries a reason)."""

SCHEMA_VERSION = 2
"""The policy schema this code reads; version 1 files are upgraded on load (with a warning)."""

RouteName = Literal["exact_lexical_lookup", "factual_lookup", "synthesis"]
ROUTE_NAMES: tuple[RouteName, ...] = ("exact_lexical_lookup", "factual_lookup", "synthesis")


Seconds = Annotated[float, Field(gt=0, allow_inf_nan=False, description="In seconds.")]
"""A duration in seconds: finite and > 0 (``.inf``, ``.nan``, 0 and negatives are rejected)."""

Milliseconds = Annotated[float, Field(gt=0, allow_inf_nan=False, description="In milliseconds.")]
"""A duration in milliseconds: finite and > 0."""

Weight = Annotated[float, Field(ge=0, allow_inf_nan=False)]
"""A fusion weight: finite and >= 0 (0 mutes a tier)."""

Applies = Literal["build", "turn", "promote"]
"""When a field is read: ``build`` once, when the graph (its tiers, reranker, router and stores)
is built; ``turn`` by the nodes on every turn, so a run context's policy may change it;
``promote`` only by ``ragtiller promote``, never by the graph."""


def _tagged(applies: Applies, description: str) -> Any:
    return Field(description=description, json_schema_extra={"applies": applies})


def build_field(description: str) -> Any:
    """A field read when the graph is built: a run policy that changes it is refused, or (its
    fusion, feedback and window) rebuilds the tiers."""
    return _tagged("build", description)


def turn_field(description: str) -> Any:
    """A field the nodes read on every turn."""
    return _tagged("turn", description)


def promote_field(description: str) -> Any:
    """A rule of ``ragtiller promote``; the graph never reads it."""
    return _tagged("promote", description)


class TriggerKind(StrEnum):
    """Lexical triggers the deterministic router can look for."""

    TICKET_ID = "ticket_id"
    POLICY_ID = "policy_id"
    ACRONYM = "acronym"
    ERROR_MESSAGE = "error_message"
    QUOTED_PHRASE = "quoted_phrase"
    IDENTIFIER = "identifier"
    PROPER_NOUN = "proper_noun"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RouteConfig(_Model):
    """What one route turns on. ``conditional`` switches are decided per query, with a reason."""

    namespace: Annotated[
        str | list[str],
        turn_field("Namespace(s) the route searches; several are searched and fused."),
    ] = "default"
    top_k: Annotated[
        int,
        Field(gt=0),
        turn_field("Passages the route returns (capped by budgets.max_chunks)."),
    ] = 5
    hybrid: Annotated[
        Toggle,
        turn_field("Add the lexical (BM25) tier; conditional: when a lexical trigger fired."),
    ] = "conditional"
    parent_child: Annotated[
        Toggle,
        turn_field(
            "Add the parent-child tier (a section's best child in a window of its neighbours); "
            "conditional: for broad or synthesis questions."
        ),
    ] = True
    rerank: Annotated[
        Toggle,
        turn_field("Run the rerank stage; conditional: unless an exact BM25 match settles it."),
    ] = "conditional"

    @property
    def namespaces(self) -> list[str]:
        """The namespaces as a list."""
        return [self.namespace] if isinstance(self.namespace, str) else list(self.namespace)


class RouterConfig(_Model):
    """Which router classifies queries."""

    min_query_chars: Annotated[
        int,
        Field(ge=1),
        build_field(
            "An input shorter than this (in characters, trimmed) and with no lexical trigger is "
            "not searched (no_retrieval, too-short): chatter such as 'why not?'. Lower it where "
            "users search with single keywords."
        ),
    ] = 12
    llm_router: Annotated[
        Literal["off", "evaluated_optional", "on"],
        build_field(
            "The LLM router beside the deterministic one: off, on, or evaluated_optional (on "
            "only when llm_eval_artifact proves its lift)."
        ),
    ] = "off"
    llm_eval_artifact: Annotated[
        str | None,
        build_field(
            "Path (a file, relative to the working directory) to a `ragtiller promote` "
            "decision proving the LLM router's lift; read once, for evaluated_optional."
        ),
    ] = None
    llm_min_confidence: Annotated[
        float,
        Field(ge=0.0, le=1.0),
        build_field("The LLM's route is used only at this confidence or above (0 to 1)."),
    ] = 0.6
    llm_timeout_s: Annotated[
        Seconds,
        build_field("In seconds: the most one routing call (cache, quota, model) may take."),
    ] = 5.0
    cache_ttl_s: Annotated[
        int,
        Field(gt=0),
        build_field("In seconds: how long one query's route choice is cached."),
    ] = 21600

    @field_validator("llm_router", mode="before")
    @classmethod
    def _yaml_booleans(cls, value: object) -> object:
        # YAML 1.1 reads a bare `off` / `on` as a boolean.
        return {False: "off", True: "on"}.get(value, value) if isinstance(value, bool) else value


class StepBackConfig(_Model):
    """Step-back: one more general question, for broad turns only."""

    enabled: Annotated[
        bool, turn_field("Ask the chat model for a more general question on broad turns.")
    ] = True
    cache_ttl_s: Annotated[
        int,
        Field(gt=0),
        turn_field("In seconds: how long one question's step-back is cached."),
    ] = 21600
    refund_on_failure: Annotated[
        bool,
        turn_field(
            "Refund the chat_gen unit (one call) when the call fails. Off: a failed call still "
            "cost the provider."
        ),
    ] = False


class DeadlinesConfig(_Model):
    """How long each provider call, and the whole turn, may take before its fallback runs.

    A stage past its deadline ends as ``error`` with reason ``timeout`` and a degradation label;
    its fallback answers instead (no query vector: the lexical tier only; a tier: no hits;
    rerank: the fused order; step-back: the original question). Each stage's deadline is also
    cut to the time the turn has left; a stage that starts with none left is skipped with
    reason ``turn-deadline`` and the turn answers with what it has.
    """

    embed_s: Annotated[Seconds, turn_field("In seconds: embedding the query.")] = 5.0
    tier_s: Annotated[Seconds, turn_field("In seconds: each tier search.")] = 5.0
    rerank_s: Annotated[Seconds, turn_field("In seconds: the rerank stage.")] = 5.0
    step_back_s: Annotated[Seconds, turn_field("In seconds: the step-back call.")] = 10.0
    turn_s: Annotated[
        Seconds,
        turn_field("In seconds: the whole turn (each stage's deadline is cut to what is left)."),
    ] = 15.0


class QuotaConfig(_Model):
    """Daily LLM budget. The window is the calendar day in ``timezone``, by the quota store's
    clock: with Redis, Redis's own (``TIME``), the same day for every replica."""

    chat_gen_per_day: Annotated[
        int,
        Field(ge=0),
        turn_field(
            "In calls a day: chat-model calls (step-back and the LLM router) a day. Sizes the "
            "default ledger when the graph is built; a run policy can lower it, never raise it."
        ),
    ] = 20
    timezone: Annotated[
        str, build_field("IANA timezone whose calendar day is the quota window ('UTC').")
    ] = "UTC"

    @field_validator("timezone")
    @classmethod
    def _known_timezone(cls, value: str) -> str:
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError) as e:
            raise ValueError(f"unknown timezone {value!r}; use an IANA name such as 'UTC'") from e
        return value


class RerankerConfig(_Model):
    """The rerank floor (free) and ceiling (paid), and the rules that keep the ceiling affordable."""

    provider: Annotated[
        Literal["zscore", "identity", "cross-encoder", "cohere"],
        build_field(
            "The free floor: zscore (fused tier scores), identity (the fused order) or "
            "cross-encoder (a local model); cohere is the z-score floor under a Cohere ceiling."
        ),
    ] = "zscore"
    ceiling: Annotated[
        Literal["none", "cross-encoder", "cohere"],
        build_field("The paid ceiling over the floor, within the rules below; none: the floor."),
    ] = "none"
    require_eval_lift: Annotated[
        bool,
        build_field("Run the ceiling only when ceiling_eval_artifact proves its lift."),
    ] = True
    ceiling_eval_artifact: Annotated[
        str | None,
        build_field(
            "Path (a file, relative to the working directory) to a `ragtiller promote` "
            "decision proving the ceiling's lift."
        ),
    ] = None
    max_p95_latency_ms_added: Annotated[
        Milliseconds,
        build_field(
            "In milliseconds: the ceiling is skipped (latency) while its p95 call time is above."
        ),
    ] = 500
    max_cost_usd_per_request_added: Annotated[
        float,
        Field(ge=0),
        build_field("In USD: the ceiling is skipped (budget) when one call costs more."),
    ] = 0.01
    cost_usd_per_call: Annotated[
        float,
        Field(ge=0),
        build_field(
            "In USD per ceiling call: what a turn's manifest reports a call cost, and what "
            "max_cost_usd_per_request_added is held against."
        ),
    ] = 0.002
    daily_calls: Annotated[
        int,
        Field(ge=0),
        turn_field(
            "In calls a day: ceiling calls a day. Sizes the ledger when the graph is built; a "
            "run policy can lower it, never raise it."
        ),
    ] = 1000
    cache_ttl_s: Annotated[
        int, Field(gt=0), build_field("In seconds: how long a ceiling's order is cached.")
    ] = 600
    exact_match_margin: Annotated[
        float,
        Field(gt=0),
        build_field(
            "A ratio: a conditional rerank is skipped (exact-match) when the top BM25 score is at "
            "least this many times the second and that hit holds the trigger token verbatim."
        ),
    ] = 1.5
    max_candidates: Annotated[
        int, Field(gt=0, le=100), build_field("In candidates: the most sent to the ceiling.")
    ] = 100


class BudgetsConfig(_Model):
    """Sizes: passages returned at most, the wide candidate list after fusion, the context."""

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
    ] = 3
    context_words: Annotated[
        int | None,
        Field(gt=0),
        turn_field(
            "In words (whitespace-separated; a CJK character is one, and a run without spaces one per "
            "20 characters): the most text the turn's documents and context "
            "hold; passages past it are left out, and a label says so. None: no bound "
            "(evaluation at depth)."
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
            "A factor: the candidate cap (hits asked of each tier, candidates kept after "
            "fusion) is max(this x max_chunks, candidate_floor)."
        ),
    ] = 3
    candidate_floor: Annotated[
        int,
        Field(gt=0),
        turn_field("In candidates: the candidate cap is never below this."),
    ] = 20
    candidate_pool: Annotated[
        Literal["multiplier", "documents"],
        turn_field(
            "How the candidate cap is set: max(candidate_multiplier x max_chunks, "
            "candidate_floor) (multiplier), or at least max_chunks x passages_per_document too "
            "(documents), so every document a turn may return can bring its best passages."
        ),
    ] = "multiplier"
    max_query_chars: Annotated[
        int,
        Field(gt=0),
        turn_field("In characters: longer queries are truncated for routing and embedding."),
    ] = 4000
    query_window_words: Annotated[
        int | None,
        Field(gt=0),
        turn_field(
            "In words: a query longer than this is embedded as consecutive windows of this "
            "many words whose vectors are averaged, so an embedder that truncates its input "
            "(MiniLM: 256 wordpieces) still reads all of it. None: the query is embedded "
            "whole (the embedder truncates)."
        ),
    ] = None

    @property
    def candidate_cap(self) -> int:
        """``max(candidate_multiplier x max_chunks, candidate_floor)``, and with
        ``candidate_pool: documents`` at least ``max_chunks x passages_per_document``."""
        cap = max(self.candidate_multiplier * self.max_chunks, self.candidate_floor)
        if self.candidate_pool == "documents":
            cap = max(cap, self.max_chunks * self.passages_per_document)
        return cap


class FusionConfig(_Model):
    """How tier results are merged."""

    method: Annotated[
        Literal["rrf", "zscore", "minmax", "margin"],
        turn_field(
            "rrf fuses ranks, zscore and minmax fuse normalised scores. margin chooses per "
            "query, at each fusion: zscore when some tier's best score stands at least `margin` "
            "standard deviations above its second, rrf otherwise."
        ),
    ] = "rrf"
    rrf_k: Annotated[
        int,
        Field(gt=0),
        turn_field(
            "A rank offset: rrf adds weight / (rrf_k + rank) per tier, rank from 1; larger flattens."
        ),
    ] = 60
    margin: Annotated[
        float,
        Field(ge=0, allow_inf_nan=False),
        turn_field(
            "In standard deviations of a tier's scores, for method margin: the gap between its "
            "best and second score above which scores are fused."
        ),
    ] = 1.0
    tier_weights: Annotated[
        dict[str, Weight],
        turn_field(
            "A weight per tier name (finite, >= 0; default 1) in fusion and in the z-score "
            "floor. 0 mutes a tier: it is not searched (skipped: weight-0), unless it is "
            "lexical (the rerank edge reads its exact matches) or the turn has no other tier."
        ),
    ] = Field(default_factory=dict)
    tier_depth: Annotated[
        int | None,
        Field(gt=0),
        turn_field("In hits: how many each tier is asked for; None: the candidate cap."),
    ] = None
    misses: Annotated[
        Literal["floor", "exact"],
        turn_field(
            "How zscore fusion scores a passage one tier did not return: at that tier's lowest "
            "z (floor), or at the tier's own score for it (exact: the embedded dense and BM25 "
            "tiers, Rocchio over them and a Pinecone dense tier score the turn's other "
            "passages; any other tier keeps the floor)."
        ),
    ] = "floor"
    scale_depth: Annotated[
        int | None,
        Field(gt=0),
        turn_field(
            "In hits: zscore passage fusion (the passages' documents and positions) takes each "
            "tier's mean and spread from its best scale_depth scores; None: from every hit it "
            "returned (which then moves with the candidate cap, and so with max_chunks)."
        ),
    ] = None
    neighbour_weight: Annotated[
        float,
        Field(ge=0, le=1, allow_inf_nan=False),
        turn_field(
            "With doc_aggregation max and document_unit passage: documents rank by their best "
            "passage's fused score mixed, at this weight, with the mean fused score of its "
            "neighbour_k nearest neighbours (by dense cosine, weighed by it) among the best "
            "neighbour_depth passages. 0: off. Needs the dense tier's vectors (embedded, or "
            "fetched from Pinecone for the turn); the passages shown and their order do not "
            "change."
        ),
    ] = 0.0
    neighbour_k: Annotated[
        int,
        Field(gt=0),
        turn_field("How many nearest passages each passage borrows from (neighbour_weight)."),
    ] = 5
    neighbour_depth: Annotated[
        int,
        Field(gt=1),
        turn_field("In passages: how many of the best fused passages are regularized."),
    ] = 50
    doc_aggregation: Annotated[
        Literal["off", "max", "sum"],
        turn_field(
            "Rank documents, then passages within them. A document's hits in one tier combine "
            "by their best score (max) or their total (sum) into its rank; its best passages "
            "fill the positions its passages hold in the fused passage order. off: passages "
            "compete on their fused score alone."
        ),
    ] = "off"
    lexical_unit: Annotated[
        Literal["chunk", "section"],
        build_field(
            "What the lexical tier scores: child chunks, or whole parent sections (BM25 "
            "statistics of sections, built from the parent table on first use). Section scores "
            "rank documents only: the passages returned come from the other tiers."
        ),
    ] = "chunk"
    document_unit: Annotated[
        Literal["passage", "paragraph", "section"],
        build_field(
            "With doc_aggregation max: what a document ranks by. passage: its best passage. "
            "paragraph: its best unit, the passages cut from one paragraph scored as one text "
            "by each tier (BM25 over the unit, the cosine of its mean passage vector) and "
            "fused; section: the same over whole sections. Passages returned and their order "
            "within a document do not change."
        ),
    ] = "passage"
    passage_rescore: Annotated[
        Literal["off", "sentence", "sentence_local"],
        turn_field(
            "With doc_aggregation max or sum: order each document's passages by their fused "
            "score plus how much of the query their best sentence holds (share of the query "
            "terms' IDF); no model call. sentence_local: each term's IDF times its IDF among "
            "the candidate passages, so the terms every candidate shares (the article's own "
            "topic) weigh least. off: by fused score."
        ),
    ] = "off"

    @field_validator("passage_rescore", mode="before")
    @classmethod
    def _yaml_off(cls, value: object) -> object:
        # YAML 1.1 reads a bare `off` as a boolean.
        return "off" if value is False else value


class FeedbackConfig(_Model):
    """Zero-LLM pseudo-relevance feedback: a tier searches twice, the second time with a query
    expanded from its own first-pass top hits (RM3 terms for BM25, Rocchio for vectors)."""

    lexical: Annotated[
        Literal["off", "rm3"],
        build_field("rm3: the lexical tier searches again with RM3 expansion terms; off: once."),
    ] = "off"
    lexical_docs: Annotated[
        int, Field(gt=0), build_field("In hits: the first-pass hits RM3 reads.")
    ] = 10
    lexical_terms: Annotated[
        int, Field(gt=0), build_field("In terms: the expansion terms RM3 keeps.")
    ] = 10
    lexical_original_weight: Annotated[
        float,
        Field(ge=0, le=1),
        build_field("A share (0 to 1): the weight of the original query terms in RM3."),
    ] = 0.5
    dense: Annotated[
        Literal["off", "rocchio"],
        build_field(
            "rocchio: the embedded vector tiers search again with the query vector moved "
            "toward their first pass (Rocchio); off: once."
        ),
    ] = "off"
    dense_docs: Annotated[
        int,
        Field(gt=0),
        build_field("In chunks (or fused documents): the first-pass hits Rocchio averages."),
    ] = 3
    dense_weight: Annotated[
        float,
        Field(ge=0),
        build_field("A weight: their mean vector's, beside the query vector's (1)."),
    ] = 0.5
    dense_source: Annotated[
        Literal["tier", "fused"],
        build_field(
            "Which first pass picks Rocchio's feedback: the vector tier's own top chunks "
            "(tier), or the top documents of the dense and lexical first passes fused as "
            "`fusion` fuses them (fused; needs an embedded lexical tier, else the tier's own). "
            "The fused first pass reads BM25 even on a route whose hybrid switch leaves the "
            "lexical tier out of the turn's fusion."
        ),
    ] = "tier"
    dense_strength: Annotated[
        Literal["fixed", "agreement"],
        build_field(
            "With dense_source fused: Rocchio's weight is dense_weight (fixed), or dense_weight "
            "times the share of the top 10 documents the dense and lexical first passes have in "
            "common (agreement, 0 to 1): no move when the tiers disagree."
        ),
    ] = "fixed"
    dense_vectors: Annotated[
        Literal["passage", "paragraph"],
        build_field(
            "What Rocchio averages for each feedback document: its best passage's vector "
            "(passage), or the mean vector of that passage's paragraph, the passages cut from "
            "one paragraph (paragraph), so a document's feedback does not depend on where "
            "ingest cut it."
        ),
    ] = "passage"
    passage_scores: Annotated[
        Literal["moved", "query"],
        build_field(
            "With doc_aggregation max or sum: which dense scores order each document's "
            "passages: the moved query's, as for the document ranking (moved), or the "
            "question's own vector's (query)."
        ),
    ] = "moved"
    passage_positions: Annotated[
        Literal["moved", "query"],
        build_field(
            "With doc_aggregation max or sum: which dense scores decide how many of the "
            "leading positions each document holds: the moved query's (moved), or the "
            "question's own vector's (query), so feedback's pull toward its best documents "
            "ranks them without handing them every position."
        ),
    ] = "moved"
    dense_rescore: Annotated[
        Literal["candidates", "full"],
        build_field(
            "Rocchio's second pass over an exact embedded index: re-score the first pass's "
            "best dense_candidates chunks with the moved vector (candidates), or scan every "
            "chunk again (full). An approximate (HNSW) tier searches its graph again either way."
        ),
    ] = "candidates"
    dense_candidates: Annotated[
        int,
        Field(gt=0),
        build_field("In chunks: the first-pass hits the candidates re-score reads."),
    ] = 1000


class BackendConfig(_Model):
    """Where a tier is served from, and what answers when that backend cannot."""

    provider: Annotated[
        Literal["embedded", "pinecone"],
        build_field("Serve the tier from the embedded index, or from Pinecone."),
    ] = "embedded"
    fallback: Annotated[
        Literal["embedded", "none"],
        build_field(
            "With Pinecone: serve from the embedded index when Pinecone has no credentials; "
            "none: the tier is skipped (no-credentials)."
        ),
    ] = "embedded"
    fallback_on_outage: Annotated[
        bool,
        build_field(
            "Also fall back on Pinecone errors (429, 5xx, timeouts), not only on missing "
            "credentials."
        ),
    ] = False
    timeout_s: Annotated[
        Seconds,
        build_field(
            "In seconds: the Pinecone query deadline; below `deadlines.tier_s`, so the fallback "
            "still has time to answer."
        ),
    ] = 4.0


class DenseBackendConfig(BackendConfig):
    """Where the dense tier is served from, its fallback, and how the embedded one searches."""

    search: Annotated[
        Literal["auto", "exact", "approximate"],
        build_field(
            "How the embedded dense and parent-child tiers search: every vector (exact), the "
            "index's HNSW graph (approximate; built on first use where the index has none), or "
            "the graph where the index has one (auto: ingest builds one from 50,000 chunks up)."
        ),
    ] = "auto"


class LexicalBackendConfig(BackendConfig):
    """Where the lexical tier is served from (Pinecone: BM25 sparse vectors), and its fallback.

    The same fields as ``dense_backend``: ``fallback: embedded`` serves from the embedded bm25s
    index when Pinecone has no credentials (and on Pinecone errors with ``fallback_on_outage``).
    BM25 is always exact.
    """


class PromotionConfig(_Model):
    """Rules ``ragtiller promote`` applies to this policy as a candidate."""

    required_slices: Annotated[
        list[str],
        promote_field("Slice names that must each have judged queries and meet min_ndcg_lift."),
    ] = Field(default_factory=list)
    min_ndcg_lift: Annotated[
        float,
        promote_field(
            "In NDCG@10 (answer MRR@10 for QA): the mean lift needed overall and in each "
            "required slice."
        ),
    ] = 0.0
    max_slice_regression: Annotated[
        float,
        Field(ge=0),
        promote_field("In NDCG@10: the most any judged slice's mean lift may fall below 0."),
    ] = 0.02
    min_slice_queries: Annotated[
        int,
        Field(ge=1),
        promote_field(
            "In queries: slices with fewer judged queries are reported, not judged, by "
            "max_slice_regression: below 1 / max_slice_regression queries, one query alone "
            "can move a slice's mean past the limit (the default 50 is 1 / 0.02)."
        ),
    ] = 50
    max_p95_latency_ms: Annotated[
        Milliseconds | None,
        promote_field("In milliseconds: the candidate's p95 turn latency at most; None: any."),
    ] = None
    max_llm_calls_per_turn: Annotated[
        float | None,
        Field(ge=0),
        promote_field("In calls per turn: the candidate's mean LLM calls at most; None: any."),
    ] = None


class RetrievalPolicy(_Model):
    """A versioned retrieval policy: every field is read by the code its description names.

    Example:
        >>> from ragtiller import load_policy
        >>> policy = load_policy()  # the shipped default
        >>> policy.routes["synthesis"].top_k
        8
    """

    @property
    def tier_hits(self) -> int:
        """Hits each tier is asked for on a turn: ``fusion.tier_depth``, else the candidate cap."""
        return self.fusion.tier_depth or self.budgets.candidate_cap

    schema_version: Annotated[
        Literal[2],
        build_field("The schema the file is written in; 1 is upgraded on load, with a warning."),
    ]
    policy_id: Annotated[
        str, Field(min_length=1), turn_field("The policy's name, recorded in each turn's manifest.")
    ]
    version: Annotated[
        str, turn_field("An opaque label (a date works), recorded in each turn's manifest.")
    ]
    routes: dict[RouteName, RouteConfig] = Field(
        description="What each query type turns on: exact_lexical_lookup, factual_lookup, synthesis."
    )
    router: RouterConfig = RouterConfig()
    lexical_triggers: Annotated[
        list[TriggerKind],
        build_field(
            "The trigger kinds the router looks for: a strong one (ticket id, policy id, error "
            "message, quoted phrase) routes a query to exact_lexical_lookup; any that fires "
            "turns a conditional hybrid on."
        ),
    ] = Field(default_factory=lambda: list(TriggerKind))
    step_back: StepBackConfig = StepBackConfig()
    quota: QuotaConfig = QuotaConfig()
    reranker: RerankerConfig = RerankerConfig()
    budgets: BudgetsConfig = BudgetsConfig()
    fusion: FusionConfig = FusionConfig()
    deadlines: DeadlinesConfig = DeadlinesConfig()
    dense_backend: DenseBackendConfig = DenseBackendConfig()
    lexical_backend: LexicalBackendConfig = LexicalBackendConfig()
    feedback: FeedbackConfig = FeedbackConfig()
    promotion: PromotionConfig = PromotionConfig()

    @field_validator("version", mode="before")
    @classmethod
    def _version_as_text(cls, value: object) -> object:
        # YAML reads 2026-06-16 as a date; the version is an opaque label.
        return value.isoformat() if isinstance(value, date) else value

    @model_validator(mode="after")
    def _backend_deadline_leaves_time_for_the_fallback(self) -> RetrievalPolicy:
        for name, backend in (("dense", self.dense_backend), ("lexical", self.lexical_backend)):
            if backend.provider != "embedded" and backend.timeout_s >= self.deadlines.tier_s:
                raise ValueError(
                    f"{name}_backend.timeout_s ({backend.timeout_s}) must be below "
                    f"deadlines.tier_s ({self.deadlines.tier_s}), or the tier's deadline passes "
                    "before its fallback can answer"
                )
        return self

    @model_validator(mode="after")
    def _every_route_defined(self) -> RetrievalPolicy:
        missing = [name for name in ROUTE_NAMES if name not in self.routes]
        if missing:
            raise ValueError(f"routes must define {', '.join(missing)}")
        return self

    def route(self, name: RouteName) -> RouteConfig:
        """The configuration of route ``name``."""
        return self.routes[name]
