"""Policy sections for the services around ranking: routers, step-back, deadlines, quota,
the rerank ceiling, tier backends and promotion rules."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator

from ragtiller.policies.schema_base import (
    Milliseconds,
    PolicyModel,
    Seconds,
    build_field,
    promote_field,
    turn_field,
)


class RouterConfig(PolicyModel):
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


class StepBackConfig(PolicyModel):
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


class DeadlinesConfig(PolicyModel):
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


class QuotaConfig(PolicyModel):
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
    chat_gen_per_tenant_per_day: Annotated[
        int | None,
        Field(ge=0),
        turn_field(
            "In calls a day: each tenant's own chat-model calls a day, beside the shared "
            "chat_gen_per_day (a call needs room in both; a turn without a tenant spends the "
            "shared one only); null: no per-tenant limit. A run policy can lower it, never "
            "raise it."
        ),
    ] = None
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


class RerankerConfig(PolicyModel):
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


class BackendConfig(PolicyModel):
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


class PromotionConfig(PolicyModel):
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
