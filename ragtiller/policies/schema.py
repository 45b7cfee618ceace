"""The retrieval policy: a versioned, validated artifact that drives the graph's edges."""

from __future__ import annotations

from datetime import date
from enum import StrEnum
from typing import Annotated, Literal

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

    namespace: str | list[str] = Field(
        "default", description="Namespace(s) searched; several are fused."
    )
    top_k: Annotated[int, Field(gt=0, description="Chunks returned to the caller.")] = 5
    hybrid: Toggle = Field("conditional", description="Add the lexical (BM25) tier.")
    parent_child: Toggle = Field(
        True, description="Add the parent-child tier (whole sections scored by their best child)."
    )
    rerank: Toggle = Field("conditional", description="Run the rerank stage.")

    @property
    def namespaces(self) -> list[str]:
        """The namespaces as a list."""
        return [self.namespace] if isinstance(self.namespace, str) else list(self.namespace)


class RouterConfig(_Model):
    """Which router classifies queries."""

    llm_router: Literal["off", "evaluated_optional", "on"] = "off"
    llm_eval_artifact: str | None = Field(
        None, description="Path to a `ragtiller promote` decision proving the LLM router's lift."
    )
    llm_min_confidence: Annotated[float, Field(ge=0.0, le=1.0)] = 0.6
    llm_timeout_s: Annotated[Seconds, Field(description="LLM router call timeout, in seconds.")] = (
        5.0
    )
    cache_ttl_s: Annotated[
        int, Field(gt=0, description="How long one query's route choice is cached, in seconds.")
    ] = 21600

    @field_validator("llm_router", mode="before")
    @classmethod
    def _yaml_booleans(cls, value: object) -> object:
        # YAML 1.1 reads a bare `off` / `on` as a boolean.
        return {False: "off", True: "on"}.get(value, value) if isinstance(value, bool) else value


class StepBackConfig(_Model):
    """Step-back: one more general question, for broad turns only."""

    enabled: bool = True
    cache_ttl_s: Annotated[int, Field(gt=0, description="In seconds.")] = 21600
    refund_on_failure: bool = Field(
        False,
        description="Refund the quota when the call fails. Off: a failed call still cost the provider.",
    )


class DeadlinesConfig(_Model):
    """How long each provider call, and the whole turn, may take before its fallback runs.

    A stage past its deadline ends as ``error`` with reason ``timeout`` and a degradation label;
    its fallback answers instead (no query vector: the lexical tier only; a tier: no hits;
    rerank: the fused order; step-back: the original question). Each stage's deadline is also
    cut to the time the turn has left; a stage that starts with none left is skipped with
    reason ``turn-deadline`` and the turn answers with what it has.
    """

    embed_s: Seconds = 5.0
    tier_s: Seconds = Field(5.0, description="Each tier search, in seconds.")
    rerank_s: Seconds = 5.0
    step_back_s: Seconds = 10.0
    turn_s: Seconds = Field(15.0, description="The whole turn, in seconds.")


class QuotaConfig(_Model):
    """Daily LLM budget. The window is the calendar day in ``timezone``, by the quota store's
    clock: with Redis, Redis's own (``TIME``), the same day for every replica."""

    chat_gen_per_day: Annotated[int, Field(ge=0)] = 20
    timezone: str = "UTC"

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

    provider: Literal["zscore", "identity", "cross-encoder", "cohere"] = "zscore"
    ceiling: Literal["none", "cross-encoder", "cohere"] = "none"
    require_eval_lift: bool = True
    ceiling_eval_artifact: str | None = Field(
        None, description="Path to a `ragtiller promote` decision proving the ceiling's lift."
    )
    max_p95_latency_ms_added: Annotated[Milliseconds, Field(description="In milliseconds.")] = 500
    max_cost_usd_per_request_added: Annotated[float, Field(ge=0, description="In USD.")] = 0.01
    cost_usd_per_call: Annotated[float, Field(ge=0, description="In USD, per rerank call.")] = 0.002
    daily_calls: Annotated[int, Field(ge=0)] = 1000
    cache_ttl_s: Annotated[int, Field(gt=0, description="In seconds.")] = 600
    exact_match_margin: Annotated[
        float,
        Field(gt=0, description="Top BM25 score / second BM25 score needed for `exact-match`."),
    ] = 1.5
    max_candidates: Annotated[int, Field(gt=0, le=100)] = 100


class BudgetsConfig(_Model):
    """Sizes: passages returned at most, the wide candidate list after fusion, the context."""

    max_chunks: Annotated[int, Field(gt=0, description="Most passages one turn returns.")] = 12
    passages_per_document: Annotated[
        int,
        Field(
            gt=0,
            description="Per turn: most passages one document contributes to the result (its "
            "best by the passage score, as Elasticsearch's collapse returns inner_hits).",
        ),
    ] = 3
    context_words: Annotated[
        int | None,
        Field(
            gt=0,
            description="Per turn, in words (whitespace-separated): the most text the turn's "
            "documents and context hold; passages past it are left out, and a label says so. "
            "None: no bound (evaluation at depth).",
        ),
    ] = 1500
    window_words: Annotated[
        int,
        Field(
            gt=0,
            description="In words, read when the graph is built: the parent-child tier returns "
            "its best child with neighbouring children of the same section up to this size, "
            "never more of the section.",
        ),
    ] = 300
    candidate_multiplier: Annotated[int, Field(gt=0)] = 3
    candidate_floor: Annotated[int, Field(gt=0)] = 20
    max_query_chars: Annotated[
        int, Field(gt=0, description="Longer queries are truncated for embedding.")
    ] = 4000

    @property
    def candidate_cap(self) -> int:
        """``max(candidate_multiplier x max_chunks, candidate_floor)``."""
        return max(self.candidate_multiplier * self.max_chunks, self.candidate_floor)


class FusionConfig(_Model):
    """How tier results are merged."""

    method: Literal["rrf", "zscore", "minmax", "margin"] = Field(
        "rrf",
        description="Per turn: rrf fuses ranks, zscore and minmax fuse normalised scores. "
        "margin chooses per query, at each fusion: zscore when some tier's best score stands "
        "at least `margin` standard deviations above its second, rrf otherwise.",
    )
    rrf_k: Annotated[int, Field(gt=0)] = 60
    margin: Annotated[
        float,
        Field(
            ge=0,
            allow_inf_nan=False,
            description="Per turn, for method margin: the gap between a tier's best and second "
            "score, in standard deviations of that tier's scores, above which scores are fused.",
        ),
    ] = 1.0
    tier_weights: dict[str, Weight] = Field(
        default_factory=dict, description="Weight per tier name, finite and >= 0; default 1."
    )
    tier_depth: Annotated[
        int | None, Field(gt=0, description="Hits asked of each tier; default: candidate cap.")
    ] = None
    doc_aggregation: Literal["off", "max", "sum"] = Field(
        "off",
        description="Per turn: rank documents, then passages within them. A document's hits in "
        "one tier combine by their best score (max) or their total (sum) into its rank; its "
        "best passages fill the positions its passages hold in the fused passage order. off: "
        "passages compete on their fused score alone.",
    )
    lexical_unit: Literal["chunk", "section"] = Field(
        "chunk",
        description="What the lexical tier scores: child chunks, or whole parent sections "
        "(BM25 statistics of sections, built from the parent table on first use). Section "
        "scores rank documents only: the passages returned come from the other tiers.",
    )
    passage_rescore: Literal["off", "sentence"] = Field(
        "off",
        description="Per turn, with doc_aggregation max or sum: order each document's passages "
        "by their fused score plus how much of the query their best sentence holds (share "
        "of the query terms' IDF); no model call. off: by fused score.",
    )

    @field_validator("passage_rescore", mode="before")
    @classmethod
    def _yaml_off(cls, value: object) -> object:
        # YAML 1.1 reads a bare `off` as a boolean.
        return "off" if value is False else value


class FeedbackConfig(_Model):
    """Zero-LLM pseudo-relevance feedback: a tier searches twice, the second time with a query
    expanded from its own first-pass top hits (RM3 terms for BM25, Rocchio for vectors)."""

    lexical: Literal["off", "rm3"] = "off"
    lexical_docs: Annotated[int, Field(gt=0, description="First-pass hits RM3 reads.")] = 10
    lexical_terms: Annotated[int, Field(gt=0, description="Expansion terms RM3 keeps.")] = 10
    lexical_original_weight: Annotated[
        float, Field(ge=0, le=1, description="Weight of the original query terms in RM3.")
    ] = 0.5
    dense: Literal["off", "rocchio"] = "off"
    dense_docs: Annotated[
        int, Field(gt=0, description="First-pass chunks (or fused documents) Rocchio averages.")
    ] = 3
    dense_weight: Annotated[
        float, Field(ge=0, description="Weight of their mean vector beside the query's (1).")
    ] = 0.5
    dense_source: Literal["tier", "fused"] = Field(
        "tier",
        description="Which first pass picks Rocchio's feedback: the vector tier's own top chunks "
        "(tier), or the top documents of the dense and lexical first passes fused as `fusion` "
        "fuses them (fused; needs an embedded lexical tier, else the tier's own). The fused "
        "first pass reads BM25 even on a route whose hybrid switch leaves the lexical tier out "
        "of the turn's fusion.",
    )
    dense_strength: Literal["fixed", "agreement"] = Field(
        "fixed",
        description="Per turn, with dense_source fused: Rocchio's weight is dense_weight (fixed), "
        "or dense_weight times the share of the top 10 documents the dense and lexical first "
        "passes have in common (agreement, 0 to 1): no move when the tiers disagree.",
    )
    dense_rescore: Literal["candidates", "full"] = Field(
        "candidates",
        description="Rocchio's second pass over an exact embedded index: re-score the first "
        "pass's best `dense_candidates` chunks with the moved vector (candidates), or scan every "
        "chunk again (full). An approximate (HNSW) tier searches its graph again either way.",
    )
    dense_candidates: Annotated[
        int, Field(gt=0, description="First-pass chunks the candidates re-score reads.")
    ] = 1000


class DenseBackendConfig(_Model):
    """Where the dense tier is served from, and what answers when that backend cannot."""

    provider: Literal["embedded", "pinecone"] = "embedded"
    fallback: Literal["embedded", "none"] = Field(
        "embedded", description="Serve from the embedded index when Pinecone has no credentials."
    )
    fallback_on_outage: bool = Field(
        False,
        description="Also fall back on Pinecone errors (429, 5xx, timeouts), not only on missing credentials.",
    )
    timeout_s: Annotated[
        Seconds,
        Field(
            description="Pinecone query deadline, in seconds; below `deadlines.tier_s`, so the "
            "fallback still has time to answer."
        ),
    ] = 4.0
    search: Literal["auto", "exact", "approximate"] = Field(
        "auto",
        description="How the embedded dense and parent-child tiers search: every vector (exact), "
        "the index's HNSW graph (approximate; built on first use where the index has none), or "
        "the graph where the index has one (auto: ingest builds one from 50,000 chunks up).",
    )


class LexicalBackendConfig(DenseBackendConfig):
    """Where the lexical tier is served from (Pinecone: BM25 sparse vectors), and its fallback.

    The same fields as ``dense_backend``: ``fallback: embedded`` serves from the embedded bm25s
    index when Pinecone has no credentials (and on Pinecone errors with ``fallback_on_outage``).
    """

    search: Literal["exact"] = Field("exact", description="BM25 is always exact.")


class PromotionConfig(_Model):
    """Rules ``ragtiller promote`` applies to this policy as a candidate."""

    required_slices: list[str] = Field(default_factory=list)
    min_ndcg_lift: float = 0.0
    max_slice_regression: Annotated[float, Field(ge=0)] = 0.02
    min_slice_queries: Annotated[
        int,
        Field(
            ge=1,
            description="Slices with fewer judged queries are reported, not judged, by "
            "max_slice_regression: one query's rank change moves a tiny slice's mean by more "
            "than the limit.",
        ),
    ] = 10
    max_p95_latency_ms: Milliseconds | None = None
    max_llm_calls_per_turn: Annotated[float | None, Field(ge=0)] = None


class RetrievalPolicy(_Model):
    """A versioned retrieval policy: every field is read by the code its description names.

    Example:
        >>> from ragtiller import load_policy
        >>> policy = load_policy()  # the shipped default
        >>> policy.routes["synthesis"].top_k
        8
    """

    schema_version: Literal[2]
    policy_id: Annotated[str, Field(min_length=1)]
    version: str
    routes: dict[RouteName, RouteConfig]
    router: RouterConfig = RouterConfig()
    lexical_triggers: list[TriggerKind] = Field(default_factory=lambda: list(TriggerKind))
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
