"""Typed records of one turn's decisions, as they travel through the graph state.

They are ``TypedDict``s so checkpointers, the LangGraph server and ``json.dumps`` handle them
without custom serialisers; the run manifest (:mod:`ragtiller.core.run_manifest`) turns them into
validated pydantic models once, at the end of the turn.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired

from typing_extensions import TypedDict

from ragtiller.core.tiers import StageStatus

QueryType = Literal["exact_lexical_lookup", "factual_lookup", "synthesis", "no_retrieval"]
RerankMode = Literal["ceiling", "floor"]
"""How the rerank node orders candidates: the paid ceiling (when affordable) or the free floor."""


class Decision(TypedDict):
    """Whether a switch (hybrid, fusion, rerank) is on this turn, its policy setting, and why."""

    enabled: bool
    setting: str
    """The policy value: ``true``, ``false`` or ``conditional``."""
    reason: str


class RerankDecision(Decision):
    """The rerank switch once candidates are known, and which reranker the edge chose."""

    mode: RerankMode | None
    """``ceiling`` or ``floor`` when enabled, else None."""
    token: NotRequired[str]
    """The trigger token an exact lexical match answered (reason ``exact-match``)."""


class QuotaView(TypedDict):
    """One read of the quota store, taken by the gate; it advises the edges, never spends."""

    chat_left: int
    """Chat calls this turn may make: the lower of the shared budget and its tenant's own."""
    rerank_left: int
    available: bool
    """False when the store could not be read (then both counts are 0: quotas fail closed)."""
    tenant_chat_left: NotRequired[int | None]
    """The turn's tenant's own chat budget (``quota.chat_gen_per_tenant_per_day``), what its
    manifest shows; None (or absent): no per-tenant limit, the shared budget is shown."""


class Route(TypedDict):
    """The gate's decision for this turn."""

    query_type: QueryType
    no_retrieval_reason: str | None
    is_broad: bool
    triggers: list[str]
    """Lexical triggers that fired, as ``kind:text``."""
    namespaces: list[str]
    """The namespaces this turn searches: the context's, else the input's, else the route's."""
    tenant: str | None
    """The tenant filter of this turn: the context's, else the input's; None: unscoped."""
    filter: dict[str, Any] | None
    """The run context's metadata filter (:mod:`ragtiller.core.filters`), applied with the tenant's."""
    seal: str
    """The seal of ``tenant``, ``namespaces`` and ``filter`` for the turn's thread, made by the
    gate (``ragtiller.nodes.scope``): the nodes after it refuse a route that lost it."""
    top_k: int
    truncated: bool
    """Whether the query was cut to ``budgets.max_query_chars`` for embedding."""
    hybrid: Decision | None
    parent_child: Decision | None
    rerank: Decision | None
    """The route's rerank setting before candidates are known (see :class:`RerankDecision`)."""
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
    """The payload sent to one parallel tier-search branch."""

    tier: str
    query: str
    vector: list[float] | None
    k: int
    tenant: str | None
    namespaces: list[str]
    filter: dict[str, Any] | None
    """The run's metadata filter; the tier is asked for it and the tenant's."""
    seal: str
    """The route's seal of ``tenant``, ``namespaces`` and ``filter``: the branch refuses a task
    whose scope it does not seal (one a caller wrote or edited)."""
    deadline_s: float
    """How long the branch may wait for its tier (its deadline, cut to the turn's)."""
    turn_bound: bool
    """Whether the turn's remaining time set ``deadline_s``."""
    overrides: NotRequired[dict[str, Any]]
    """The turn's run-context fields (as ``turn["overrides"]``): the branch applies them even
    when it runs in a resumed run."""


class RerankOutcome(TypedDict):
    """How the rerank node ordered the candidates."""

    method: str
    """The method that produced the order (``zscore``, ``cohere``, ``identity``, ...)."""
    detail: dict[str, Any]
    """The provider's facts (cache hit, cost in USD, the ceiling's outcome)."""
