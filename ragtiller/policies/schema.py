"""The retrieval policy: a versioned, validated artifact that drives the graph's edges."""

from __future__ import annotations

from datetime import date
from enum import StrEnum
from typing import Literal

from pydantic import Field, field_validator, model_validator

from ragtiller.policies.schema_sections import (
    FEEDBACK_DEPTH,
    BackendConfig,
    BudgetsConfig,
    CacheConfig,
    DeadlinesConfig,
    DenseBackendConfig,
    FeedbackConfig,
    FusionConfig,
    LexicalBackendConfig,
    PolicyModel,
    PromotionConfig,
    QuotaConfig,
    RerankerConfig,
    RouterConfig,
    StepBackConfig,
    Toggle,
    build_field,
    turn_field,
)

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


__all__ = (  # the sections other modules import from here
    "BackendConfig",
    "BudgetsConfig",
    "CacheConfig",
    "DeadlinesConfig",
    "PromotionConfig",
    "RerankerConfig",
    "RouterConfig",
    "Toggle",
)
