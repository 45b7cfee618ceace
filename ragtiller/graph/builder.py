"""``build_graph``: wire the seven nodes and the policy-driven edges into one compiled graph.

Each edge reads the decision its source node stored; that node also announces the stages the
edge bypasses, so every event stream lists all seven stages.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable, Sequence
from pathlib import Path
from typing import Any, Literal, Protocol, TypedDict, Unpack

from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Send

from ragtiller.adapters import TierLike, as_tier
from ragtiller.core.tiers import CHAT_RESOURCE, INDEX_TIER_NAMES, RERANK_RESOURCE, Tier, tier_role
from ragtiller.core.turn import TierTask
from ragtiller.errors import ConfigurationError
from ragtiller.graph.backends import tiers_for_policy
from ragtiller.graph.langgraph_internals import RunnableCallable, check_input_first
from ragtiller.graph.per_run import NodeMaker, PerRunNodes
from ragtiller.graph.retrieval_graph import THREAD_READS, RetrievalGraph, check_turn_input, dual
from ragtiller.index.embedded import EmbeddedIndex
from ragtiller.nodes.assemble import make_assemble
from ragtiller.nodes.components import Components, Overview, fixed_overview
from ragtiller.nodes.embed import make_embed
from ragtiller.nodes.fuse import make_fuse
from ragtiller.nodes.gate import make_gate
from ragtiller.nodes.rerank import make_rerank
from ragtiller.nodes.state import InputState, OutputState, RetrievalState
from ragtiller.nodes.step_back import make_step_back
from ragtiller.nodes.tier_search import make_tier_search
from ragtiller.policies.loader import load_policy
from ragtiller.policies.run_context import RunContext, pinned
from ragtiller.policies.schema import RetrievalPolicy
from ragtiller.ranking.query_tiers import apply_query_options
from ragtiller.rerankers import reranker_from_policy
from ragtiller.rerankers.base import Reranker
from ragtiller.stores import Cache, QuotaLedger, stores_from_env

STEP_BACK = "step-back affordable"
NO_STEP_BACK = "narrow, off or quota spent"
NO_RETRIEVAL = "no retrieval"
RERANK = "rerank: ceiling if quota left, else floor"
NO_RERANK = "no rerank"
AFTER_GATE_PATHS: dict[Hashable, str] = {
    STEP_BACK: "step_back",
    NO_STEP_BACK: "embed",
    NO_RETRIEVAL: "assemble",
}
"""Where each named edge out of the gate goes; the names label the drawn edges."""
AFTER_FUSE_PATHS: dict[Hashable, str] = {RERANK: "rerank", NO_RERANK: "assemble"}


def after_gate(state: dict[str, Any]) -> str:
    """The gate sets ``step_back.status`` to ``active`` only when step-back can produce
    something, so a quota-spent turn never enters the node."""
    if state["route"]["query_type"] == "no_retrieval":
        return NO_RETRIEVAL
    if state["step_back"]["status"] == "active":
        return STEP_BACK
    return NO_STEP_BACK


def after_embed(state: dict[str, Any]) -> list[Send] | Literal["fuse"]:
    tasks = state.get("tier_tasks") or []
    if not tasks:
        return "fuse"
    return [Send("tier_search", task) for task in tasks]


def after_fuse(state: dict[str, Any]) -> str:
    return RERANK if state["rerank"]["enabled"] else NO_RERANK


def edge(fn: Callable[[dict[str, Any]], Any]) -> RunnableCallable:
    """``fn`` with a native async path, so ``ainvoke`` never hops to a thread to take an edge."""

    async def afn(state: dict[str, Any]) -> Any:
        return fn(state)

    return RunnableCallable(fn, afn, name=fn.__name__, trace=False)


class IndexLike(Protocol):
    """What ``build_graph(index=...)`` reads: an embedder and tiers; and, if it has one, an
    ``overview(namespaces, filter)`` or ``corpus_map`` text, and a ``manifest``."""

    @property
    def embedder(self) -> Embeddings: ...

    @property
    def tiers(self) -> Sequence[TierLike]: ...


def _known_namespaces(
    namespaces: Sequence[str] | None, index: IndexLike | None
) -> Sequence[str] | None:
    if namespaces is None and index is not None:
        namespaces = getattr(getattr(index, "manifest", None), "namespaces", None)
    return namespaces


def default_stores(policy: RetrievalPolicy) -> tuple[Any, Any]:
    """Redis when ``REDIS_URL`` is set, else in-process; budgets sized by the policy."""
    limits: dict[str, int] = {
        CHAT_RESOURCE: policy.quota.chat_gen_per_day,
        RERANK_RESOURCE: policy.reranker.daily_calls,
    }
    per_tenant = policy.quota.chat_gen_per_tenant_per_day
    tenant_limits: dict[str, int] = {} if per_tenant is None else {CHAT_RESOURCE: per_tenant}
    return stores_from_env(limits, tenant_limits=tenant_limits, timezone=policy.quota.timezone)


class GraphParts(TypedDict, total=False):
    """The components a graph is built from, each optional; explicit parts override the
    index's own. ``tiers`` may be LangChain vector stores or retrievers (:func:`as_tier`);
    ``quota`` and ``cache`` default to Redis when ``REDIS_URL`` is set, else in-process;
    ``reranker`` and ``llm_router`` to the policy's; ``corpus_map`` to the index's outline (one
    text is shown only on turns without a tenant, since it cannot be cut to one)."""

    index: IndexLike | None
    embedder: Embeddings | None
    tiers: Sequence[TierLike] | None
    quota: QuotaLedger | None
    cache: Cache | None
    chat_model: BaseChatModel | None
    reranker: Reranker | None
    corpus_map: str | Overview | None
    llm_router: Any | None


def build_components(
    policy: RetrievalPolicy | str | Path | None = None,
    *,
    namespaces: Sequence[str] | None = None,
    require_tenant: bool | None = None,
    **parts: Unpack[GraphParts],
) -> Components:
    index = parts.get("index")
    tiers, embedder = parts.get("tiers"), parts.get("embedder")
    quota, cache = parts.get("quota"), parts.get("cache")
    chat_model, reranker = parts.get("chat_model"), parts.get("reranker")
    corpus_map, llm_router = parts.get("corpus_map"), parts.get("llm_router")
    resolved = policy if isinstance(policy, RetrievalPolicy) else load_policy(policy)
    given: Sequence[TierLike]
    if tiers is not None:
        given = list(tiers)
    elif isinstance(index, EmbeddedIndex):  # served by the policy's backends
        given = tiers_for_policy(resolved, index)
    else:
        given = list(index.tiers) if index is not None else []
    base_tiers = [as_tier(t, position) for position, t in enumerate(given)]
    if not base_tiers:
        raise ConfigurationError(
            "build_graph needs at least one tier: pass index=... or tiers=[...]"
        )
    tier_list = apply_query_options(resolved, base_tiers, index)
    names = [t.name for t in tier_list]
    if len(set(names)) != len(names):
        raise ConfigurationError(
            f"tier names must be unique, got {names}; name a store or retriever with "
            f"VectorStoreTier(store, name=...) or RetrieverTier(retriever, name=...)"
        )
    roles = {t.name: tier_role(t) for t in tier_list}
    known = set(roles) | set(roles.values()) | INDEX_TIER_NAMES
    unknown = sorted(set(resolved.fusion.tier_weights) - known)
    if unknown:  # a misspelled tier name would otherwise weigh nothing, silently
        raise ConfigurationError(
            f"fusion.tier_weights names tiers this graph does not have: {unknown}; "
            f"its tiers are {sorted(names)}"
        )
    emb = embedder if embedder is not None else (index.embedder if index is not None else None)
    if emb is None and any(t.needs_vector for t in tier_list):
        vector = [t.name for t in tier_list if t.needs_vector]
        raise ConfigurationError(
            f"tiers {vector} need query vectors: pass embedder=... or index=..."
        )
    if corpus_map is None and index is not None:
        corpus_map = getattr(index, "overview", None) or getattr(index, "corpus_map", None)
    if isinstance(corpus_map, str):  # one text: shown only on turns that may see all of it
        whole = _known_namespaces(namespaces, index)
        corpus_map = fixed_overview(corpus_map, whole) if corpus_map else None
    if require_tenant is None:  # default deny without an index manifest saying otherwise
        manifest = getattr(index, "manifest", None)
        require_tenant = True if manifest is None else bool(manifest.tenanted)
    if quota is None or cache is None:
        env_quota, env_cache = default_stores(resolved)
        quota = quota if quota is not None else env_quota
        cache = cache if cache is not None else env_cache
    if llm_router is None:
        from ragtiller.routing.llm import make_llm_router

        llm_router = make_llm_router(
            resolved.router,
            chat_model=chat_model,
            quota=quota,
            cache=cache,
            trigger_kinds=resolved.lexical_triggers,
            deadlines=resolved.deadlines,
            cache_ttl_s=resolved.cache.ttl_s,
        )
    given_reranker = reranker

    def variant(other: RetrievalPolicy) -> tuple[dict[str, Tier], Reranker]:
        tiers = apply_query_options(other, base_tiers, index)
        rerank = given_reranker or reranker_from_policy(
            other.reranker, ledger=quota, cache=cache, cache_ttl_s=other.cache.ttl_s
        )
        return {t.name: t for t in tiers}, rerank

    if reranker is None:
        reranker = reranker_from_policy(
            resolved.reranker, ledger=quota, cache=cache, cache_ttl_s=resolved.cache.ttl_s
        )
    from ragtiller.graph.backends import fallbacks_for_policy

    return Components(
        policy=resolved,
        embedder=emb,
        tiers={t.name: t for t in tier_list},
        quota=quota,
        cache=cache,
        chat_model=chat_model,
        reranker=reranker,
        overview=corpus_map,
        llm_router=llm_router,
        variant=variant,
        require_tenant=require_tenant,
        fallbacks=fallbacks_for_policy(resolved, index, base_tiers),
    )


def build_graph(
    policy: RetrievalPolicy | str | Path | None = None,
    *,
    checkpointer: BaseCheckpointSaver[Any] | None = None,
    interrupt_before: Sequence[str] | None = None,
    name: str = "ragtiller",
    namespaces: Sequence[str] | None = None,
    require_tenant: bool | None = None,
    **parts: Unpack[GraphParts],
) -> RetrievalGraph:
    """Build the retrieval graph (a :class:`RetrievalGraph`). Does no I/O of its own.

    ``policy``: an object, a YAML path, a shipped name, or None for the default. ``namespaces``
    (default: the index manifest's) must hold every namespace a route names. ``require_tenant``
    refuses turns that name no tenant; default: whether the index manifest says its documents
    carry tenants, True without one (pass ``records.tenanted()`` of an ``ingest_to_store``).

    Example:
        >>> from ragtiller import build_graph
        >>> from ragtiller.index import EmbeddedIndex
        >>> from ragtiller.models import HashingEmbedder
        >>> from ragtiller.ingest import build_index
        >>> index = build_index(["docs/"], embedder=HashingEmbedder())  # doctest: +SKIP
        >>> graph = build_graph(index=index)  # doctest: +SKIP
        >>> graph.invoke({"query": "how do I cancel a task?"})["context"]  # doctest: +SKIP
    """
    deps = build_components(policy, namespaces=namespaces, require_tenant=require_tenant, **parts)
    return compile_graph(
        deps,
        checkpointer=checkpointer,
        interrupt_before=interrupt_before,
        name=name,
        namespaces=_known_namespaces(namespaces, parts.get("index")),
    )


def node_makers(known_namespaces: Sequence[str] | None = None) -> dict[str, NodeMaker]:
    return {
        "gate": lambda d: make_gate(d, known_namespaces=known_namespaces),
        "step_back": make_step_back,
        "embed": make_embed,
        "tier_search": make_tier_search,
        "fuse": make_fuse,
        "rerank": make_rerank,
        "assemble": make_assemble,
    }


def compile_graph(
    deps: Components,
    *,
    checkpointer: BaseCheckpointSaver[Any] | None = None,
    interrupt_before: Sequence[str] | None = None,
    name: str = "ragtiller",
    namespaces: Sequence[str] | None = None,
) -> RetrievalGraph:
    known = list(namespaces) if namespaces is not None else None
    per_run = PerRunNodes(deps, node_makers(known), known_namespaces=known)
    builder = StateGraph(
        RetrievalState,
        context_schema=RunContext,
        input_schema=InputState,
        output_schema=OutputState,
    )
    for node in ("gate", "step_back", "embed", "tier_search", "fuse", "rerank", "assemble"):
        builder.add_node(
            node,
            dual(per_run.node(node), node),
            input_schema=TierTask if node == "tier_search" else None,
        )

    builder.add_edge(START, "gate")
    builder.add_conditional_edges("gate", edge(after_gate), AFTER_GATE_PATHS)
    builder.add_edge("step_back", "embed")
    builder.add_conditional_edges("embed", edge(after_embed), ["tier_search", "fuse"])
    builder.add_edge("tier_search", "fuse")
    builder.add_conditional_edges("fuse", edge(after_fuse), AFTER_FUSE_PATHS)
    builder.add_edge("rerank", "assemble")
    builder.add_edge("assemble", END)
    compiled = builder.compile(
        checkpointer=checkpointer,
        interrupt_before=list(interrupt_before) if interrupt_before else None,
        name=name,
    )
    check_input_first(
        compiled, lambda given, thread: check_turn_input(given, thread, deps.pin), THREAD_READS
    )

    def pinning(added: RunContext) -> RetrievalGraph:
        return compile_graph(
            dataclasses.replace(deps, pin=pinned(deps.pin, added)),
            checkpointer=checkpointer,
            interrupt_before=interrupt_before,
            name=name,
            namespaces=namespaces,
        )

    return RetrievalGraph(compiled, pinning)
