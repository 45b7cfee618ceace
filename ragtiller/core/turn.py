"""Typed records of one turn's decisions, as they travel through the graph state (``TypedDict``s,
like :mod:`ragtiller.core.tiers`; the run manifest validates them once, at the end of the turn)."""

from __future__ import annotations

from typing import Any, Literal, NotRequired

from typing_extensions import TypedDict

from ragtiller.core.tiers import StageStatus

QueryType = Literal["exact_lexical_lookup", "factual_lookup", "synthesis", "no_retrieval"]
RerankMode = Literal["ceiling", "floor"]


class Decision(TypedDict):
    """Whether a switch (hybrid, fusion, rerank) is on this turn, its policy setting, and why."""

    enabled: bool
    setting: str  # the policy value: true, false or conditional
    reason: str


class RerankDecision(Decision):
    """The rerank switch once candidates are known, and which reranker the edge chose."""

    mode: RerankMode | None  # None when not enabled
    token: NotRequired[str]  # the trigger an exact lexical match answered (exact-match)


class QuotaView(TypedDict):
    """One read of the quota store, taken by the gate; it advises the edges, never spends."""

    chat_left: int  # the lower of the shared budget and the turn's tenant's own
    rerank_left: int
    available: bool  # False: the store could not be read, both counts 0 (quotas fail closed)
    # the tenant's own chat budget, which its manifest shows; None or absent: no per-tenant limit
    tenant_chat_left: NotRequired[int | None]


class Route(TypedDict):
    query_type: QueryType
    no_retrieval_reason: str | None
    is_broad: bool
    triggers: list[str]  # kind:text
    namespaces: list[str]  # the context's, else the input's, else the route's
    tenant: str | None  # the context's, else the input's; None: unscoped
    filter: dict[str, Any] | None  # the run context's, applied with the tenant's
    seal: str  # the gate's seal of tenant, namespaces and filter: later nodes refuse one without
    top_k: int
    truncated: bool  # the query was cut to budgets.max_query_chars for embedding
    hybrid: Decision | None
    parent_child: Decision | None
    rerank: Decision | None  # before candidates are known
    router: Literal["deterministic", "llm"]
    router_detail: dict[str, Any]


class StepBack(TypedDict):
    """What step-back did: the original and generalized text, and where the text came from."""

    status: StageStatus
    reason: str | None
    original: str
    generalized: str | None
    from_cache: bool


class TierTask(TypedDict):
    tier: str
    query: str
    vector: list[float] | None
    k: int
    tenant: str | None
    namespaces: list[str]
    filter: dict[str, Any] | None
    seal: str  # the route's seal of the scope: a branch refuses a task a caller wrote or edited
    deadline_s: float  # how long the branch may wait for its tier, cut to the turn's time
    turn_bound: bool  # whether the turn's remaining time set deadline_s
    overrides: NotRequired[dict[str, Any]]  # the run context's, applied in a resumed run too


class RerankOutcome(TypedDict):
    method: str  # that produced the order: zscore, cohere, identity, ...
    detail: dict[str, Any]
