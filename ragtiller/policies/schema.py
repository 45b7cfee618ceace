"""The retrieval policy: a versioned, validated artifact that drives the graph's edges, its
sections, and the ``applies`` tag every leaf carries. Every default is the shipped default's value
(``default.yaml`` states its name and routes), so a policy that sets one field changes only it."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date
from enum import StrEnum
from typing import Annotated, Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_core import PydanticUndefined

Toggle = bool | Literal["conditional"]  # conditional: decided per query, with a reason
Seconds = Annotated[float, Field(gt=0, allow_inf_nan=False, description="In seconds.")]
Milliseconds = Annotated[float, Field(gt=0, allow_inf_nan=False, description="In milliseconds.")]
Weight = Annotated[float, Field(ge=0, allow_inf_nan=False)]  # 0 mutes a tier

# When a field is read: build, once, when the graph is built; turn, by the nodes on every turn
# (so a run context's policy may change it); promote, only by `ragtiller promote`.
Applies = Literal["build", "turn", "promote"]


def _tagged(applies: Applies) -> Callable[..., Any]:
    tag: dict[str, Any] = {"applies": applies}

    def field(default: Any = PydanticUndefined, description: str = "", **constraints: Any) -> Any:
        return Field(default, description=description, json_schema_extra=tag, **constraints)

    return field


build_field = _tagged("build")
turn_field = _tagged("turn")
promote_field = _tagged("promote")


class PolicyModel(BaseModel):
    """A policy section: unknown keys are refused, and a loaded policy never changes."""

    model_config = ConfigDict(extra="forbid", frozen=True)


# --- ranking: the budgets, fusion and feedback the shipped recipe reads ---

FEEDBACK_DEPTH = 100  # passages of each first pass Rocchio feedback reads


class BudgetsConfig(PolicyModel):
    """Sizes: passages returned at most, the wide candidate pool after fusion, the context."""

    max_chunks: int = turn_field(
        12,
        "In passages: the most one turn returns (caps top_k); also sizes the candidate cap.",
        gt=0,
    )
    passages_per_document: int = turn_field(
        5,
        "In passages: the most one document contributes to the result (its best by the "
        "passage score, as Elasticsearch's collapse returns inner_hits).",
        gt=0,
    )
    context_words: int | None = turn_field(
        1500,
        "In words (whitespace-separated; a CJK character is one, and a run without spaces "
        "one per 20 characters): the most text the turn's documents and context hold; "
        "passages past it are left out, and a label says so. None: no bound (evaluation "
        "at depth).",
        gt=0,
    )
    outline_words: int = turn_field(
        150,
        "In words: the most of the corpus outline a broad turn shows when step-back did not "
        "run (the documents the question names, else the outline's start); 0: no outline.",
        ge=0,
    )
    window_words: int = build_field(
        300,
        "In words: the parent-child tier returns its best child with neighbouring children "
        "of the same section up to this size, never more of the section.",
        gt=0,
    )
    candidate_multiplier: int = turn_field(
        3,
        "A factor: the candidate cap (hits asked of each tier, passages the rerank stage "
        "keeps) is max(this x max_chunks, candidate_floor).",
        gt=0,
    )
    candidate_floor: int = turn_field(
        20, "In candidates: the candidate cap is never below this.", gt=0
    )
    max_query_chars: int = turn_field(
        4000, "In characters: longer queries are truncated for routing and embedding.", gt=0
    )

    @property
    def candidate_cap(self) -> int:
        return max(self.candidate_multiplier * self.max_chunks, self.candidate_floor)


class FusionConfig(PolicyModel):
    """How tier results are merged (the passages; documents rank by their best passage)."""

    method: Literal["rrf", "zscore", "minmax"] = turn_field(
        "zscore", "rrf fuses ranks, zscore and minmax fuse normalised scores."
    )
    rrf_k: int = turn_field(
        60,
        "A rank offset: rrf adds weight / (rrf_k + rank) per tier, rank from 1; larger flattens.",
        gt=0,
    )
    tier_weights: dict[str, Weight] = turn_field(
        description="A weight per tier name or role (finite, >= 0; a tier not named weighs 1) in "
        "fusion; a tier weighed 0 is not searched while another tier is (a lexical tier "
        "still is: an exact match reads it).",
        default_factory=lambda: {"dense": 1.0, "lexical": 1.0, "parent_child": 0.0},
    )


class FeedbackConfig(PolicyModel):
    """Zero-LLM pseudo-relevance feedback (Rocchio): the embedded dense tier searches again with
    the query vector moved toward the best passage of each top document of the dense and lexical
    first passes, fused as ``fusion`` fuses them."""

    dense_docs: int = build_field(
        2, "In documents: the fused first pass's top documents Rocchio averages.", gt=0
    )
    dense_weight: float = build_field(
        1.0,
        "A weight: their mean vector's, beside the query vector's (1); 0: no feedback, the "
        "dense tier searches once.",
        ge=0,
    )

    @property
    def enabled(self) -> bool:  # a weight of 0 would move the vector nowhere
        return self.dense_weight > 0


# --- the services around ranking ---

PINECONE_SHARE = 0.8  # of deadlines.tier_s a Pinecone query may take (4 s of the default 5)


class RouterConfig(PolicyModel):
    """Which router classifies queries."""

    min_query_chars: int = build_field(
        12,
        "An input shorter than this (in characters, trimmed) and with no lexical trigger is "
        "not searched (no_retrieval, too-short): chatter such as 'why not?'. Lower it where "
        "users search with single keywords.",
        ge=1,
    )
    llm_router: Literal["off", "evaluated_optional", "on"] = build_field(
        "off",
        "The LLM router beside the deterministic one: off, on, or evaluated_optional (on "
        "only when llm_eval_artifact proves its lift).",
    )
    llm_eval_artifact: str | None = build_field(
        None,
        "Path (a file, relative to the working directory) to a `ragtiller promote` "
        "decision proving the LLM router's lift; read once, for evaluated_optional.",
    )
    llm_min_confidence: float = build_field(
        0.6, "The LLM's route is used only at this confidence or above (0 to 1).", ge=0.0, le=1.0
    )

    @field_validator("llm_router", mode="before")
    @classmethod
    def _yaml_booleans(cls, value: object) -> object:
        # YAML 1.1 reads a bare `off` / `on` as a boolean.
        return {False: "off", True: "on"}.get(value, value) if isinstance(value, bool) else value


class StepBackConfig(PolicyModel):
    """Step-back: one more general question, for broad turns only."""

    enabled: bool = turn_field(
        True, "Ask the chat model for a more general question on broad turns."
    )


class CacheConfig(PolicyModel):
    """How long the cache keeps a paid answer; a hit costs no call."""

    ttl_s: int = build_field(
        21600,
        "In seconds: how long a step-back question, a route choice or a rerank ceiling's "
        "order is cached (keyed by the query; the ceiling's also by the passages' ids).",
        gt=0,
    )


class DeadlinesConfig(PolicyModel):
    """How long each provider call, and the whole turn, may take before its fallback answers
    (docs/reliability.md); each stage's deadline is also cut to the time the turn has left."""

    embed_s: Seconds = turn_field(5.0, "In seconds: embedding the query.")
    tier_s: Seconds = turn_field(
        5.0,
        "In seconds: each tier search; a Pinecone query gets 0.8 of it (fixed when the "
        "graph is built), so the embedded fallback keeps time to answer.",
    )
    rerank_s: Seconds = turn_field(5.0, "In seconds: the rerank stage.")
    chat_s: Seconds = turn_field(
        10.0,
        "In seconds: each chat-model call, step-back or the LLM router (the router's, cut "
        "to turn_s, is fixed when the graph is built).",
    )
    turn_s: Seconds = turn_field(
        15.0, "In seconds: the whole turn (each stage's deadline is cut to what is left)."
    )

    @property
    def pinecone_s(self) -> float:
        """Short of ``tier_s``, so an outage is the Pinecone tier's own error, which the embedded
        fallback can still answer."""
        return PINECONE_SHARE * self.tier_s


class QuotaConfig(PolicyModel):
    """Daily LLM budget. The window is the calendar day in ``timezone``, by the quota store's
    clock: with Redis, Redis's own (``TIME``), the same day for every replica."""

    chat_gen_per_day: int = turn_field(
        20,
        "In calls a day: chat-model calls (step-back and the LLM router) a day. Sizes the "
        "default ledger when the graph is built; a run policy can lower it, never raise it.",
        ge=0,
    )
    chat_gen_per_tenant_per_day: int | None = turn_field(
        None,
        "In calls a day: each tenant's own chat-model calls a day, beside the shared "
        "chat_gen_per_day (a call needs room in both; a turn without a tenant spends the "
        "shared one only); null: no per-tenant limit. A run policy can lower it, never "
        "raise it.",
        ge=0,
    )
    timezone: str = build_field(
        "UTC", "IANA timezone whose calendar day is the quota window ('UTC')."
    )

    @field_validator("timezone")
    @classmethod
    def _known_timezone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError) as e:
            raise ValueError(f"unknown timezone {value!r}; use an IANA name such as 'UTC'") from e
        return value


class RerankerConfig(PolicyModel):
    """The rerank floor (free) and ceiling (paid), and the rules that keep the ceiling affordable."""

    provider: Literal["zscore", "identity", "cross-encoder", "cohere"] = build_field(
        "zscore",
        "The free floor: zscore (fused tier scores), identity (the fused order) or "
        "cross-encoder (a local model); cohere is the z-score floor under a Cohere ceiling.",
    )
    ceiling: Literal["none", "cross-encoder", "cohere"] = build_field(
        "none", "The paid ceiling over the floor, within the rules below; none: the floor."
    )
    require_eval_lift: bool = build_field(
        True, "Run the ceiling only when ceiling_eval_artifact proves its lift."
    )
    ceiling_eval_artifact: str | None = build_field(
        None,
        "Path (a file, relative to the working directory) to a `ragtiller promote` "
        "decision proving the ceiling's lift.",
    )
    max_p95_latency_ms_added: Milliseconds = build_field(
        500, "In milliseconds: the ceiling is skipped (latency) while its p95 call time is above."
    )
    cost_usd_per_call: float = build_field(
        0.002,
        "In USD per ceiling call (one a request at most): what a turn's manifest reports "
        "the ceiling cost; daily_calls bounds the spend.",
        ge=0,
    )
    daily_calls: int = turn_field(
        1000,
        "In calls a day: ceiling calls a day. Sizes the ledger when the graph is built; a "
        "run policy can lower it, never raise it.",
        ge=0,
    )


class BackendConfig(PolicyModel):
    """Where a tier is served from, and what answers when that backend cannot."""

    provider: Literal["embedded", "pinecone"] = build_field(
        "embedded", "Serve the tier from the embedded index, or from Pinecone."
    )
    fallback: Literal["embedded", "none"] = build_field(
        "embedded",
        "With Pinecone: serve from the embedded index when Pinecone has no credentials; "
        "none: the tier is skipped (no-credentials).",
    )
    fallback_on_outage: bool = build_field(
        False,
        "Also fall back on Pinecone errors (429, 5xx, timeouts), not only on missing credentials.",
    )


class DenseBackendConfig(BackendConfig):
    """Where the dense tier is served from, its fallback, and how the embedded one searches."""

    search: Literal["auto", "exact", "approximate"] = build_field(
        "auto",
        "How the embedded dense and parent-child tiers search: every vector (exact), the "
        "index's HNSW graph (approximate; built on first use where the index has none), or "
        "the graph where the index has one (auto: ingest builds one from 50,000 chunks up).",
    )


class LexicalBackendConfig(BackendConfig):
    """Where the lexical tier is served from (Pinecone: BM25 sparse vectors), and its fallback
    (the embedded bm25s index); BM25 is always exact."""


class PromotionConfig(PolicyModel):
    """Rules ``ragtiller promote`` applies to this policy as a candidate."""

    required_slices: list[str] = promote_field(
        description="Slice names that must each have judged queries and meet min_ndcg_lift.",
        default_factory=list,
    )
    min_ndcg_lift: float = promote_field(
        0.0,
        "In NDCG@10 (answer MRR@10 for QA): the mean lift needed overall and in each "
        "required slice.",
    )
    max_slice_regression: float = promote_field(
        0.02,
        "In NDCG@10: the most any judged slice's mean lift may fall below 0 (a slice is "
        "judged from 50 judged queries: below 1 / 0.02, one query alone could carry it).",
        ge=0,
    )
    max_p95_latency_ms: Milliseconds | None = promote_field(
        None, "In milliseconds: the candidate's p95 turn latency at most; None: any."
    )
    max_llm_calls_per_turn: float | None = promote_field(
        None, "In calls per turn: the candidate's mean LLM calls at most; None: any.", ge=0
    )


# --- the policy and its routes ---

RouteName = Literal["exact_lexical_lookup", "factual_lookup", "synthesis"]
ROUTE_NAMES: tuple[RouteName, ...] = ("exact_lexical_lookup", "factual_lookup", "synthesis")


class TriggerKind(StrEnum):
    """Lexical triggers the deterministic router can look for."""

    TICKET_ID = "ticket_id"
    POLICY_ID = "policy_id"
    ACRONYM = "acronym"
    ERROR_MESSAGE = "error_message"
    QUOTED_PHRASE = "quoted_phrase"
    IDENTIFIER = "identifier"
    PROPER_NOUN = "proper_noun"


class RouteConfig(PolicyModel):
    """What one route turns on. ``conditional`` switches are decided per query, with a reason."""

    namespace: str | list[str] = turn_field(
        "default", "Namespace(s) the route searches; several are searched and fused."
    )
    top_k: int = turn_field(5, "Passages the route returns (capped by budgets.max_chunks).", gt=0)
    hybrid: Toggle = turn_field(
        True, "Add the lexical (BM25) tier; conditional: when a lexical trigger fired."
    )
    parent_child: Toggle = turn_field(
        True,
        "Add the parent-child tier (a section's best child in a window of its neighbours); "
        "conditional: for broad or synthesis questions.",
    )
    rerank: Toggle = turn_field(
        False,
        "Let the paid rerank ceiling (reranker.ceiling) order the passages when the quota "
        "allows; conditional: unless an exact BM25 match settles it; false: the free floor "
        "(reranker.provider) does, as it does on every turn the ceiling does not.",
    )

    @property
    def namespaces(self) -> list[str]:
        return [self.namespace] if isinstance(self.namespace, str) else list(self.namespace)


class RetrievalPolicy(PolicyModel):
    """A versioned retrieval policy: every field is read by the code its description names."""

    @property
    def tier_hits(self) -> int:
        """Hits asked of each tier: the candidate cap, and with Rocchio feedback at least the first
        pass it reads (fusion reads each tier's best ``candidate_cap``)."""
        cap = self.budgets.candidate_cap
        return max(cap, FEEDBACK_DEPTH) if self.feedback.enabled else cap

    schema_version: Literal[2] = build_field(
        description="The schema the file is written in (2, the only one)."
    )
    policy_id: str = turn_field(
        description="The policy's name, recorded in each turn's manifest.", min_length=1
    )
    version: str = turn_field(
        description="An opaque label (a date works), recorded in each turn's manifest."
    )
    routes: dict[RouteName, RouteConfig] = Field(
        description="What each query type turns on: exact_lexical_lookup, factual_lookup, synthesis."
    )
    router: RouterConfig = RouterConfig()
    lexical_triggers: list[TriggerKind] = build_field(
        description="The trigger kinds the router looks for: a strong one (ticket id, policy "
        "id, error message, quoted phrase) routes a query to exact_lexical_lookup; any that "
        "fires turns a conditional hybrid on.",
        default_factory=lambda: list(TriggerKind),
    )
    step_back: StepBackConfig = StepBackConfig()
    quota: QuotaConfig = QuotaConfig()
    cache: CacheConfig = CacheConfig()
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
    def _every_route_defined(self) -> RetrievalPolicy:
        missing = [name for name in ROUTE_NAMES if name not in self.routes]
        if missing:
            raise ValueError(f"routes must define {', '.join(missing)}")
        return self
