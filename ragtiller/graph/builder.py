"""``build_graph``: the seven nodes and the edges, each reading its source node's decision; and
the graph's shape, as Mermaid or a PNG rendered offline (LangGraph's PNG renderer is a web call)."""

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
from ragtiller.core.tiers import CHAT_RESOURCE, INDEX_TIER_NAMES, Tier, tier_role
from ragtiller.core.turn import TierTask
from ragtiller.errors import ConfigurationError
from ragtiller.graph.backends import apply_query_options, fallbacks_for_policy, tiers_for_policy
from ragtiller.graph.langgraph_internals import Untraced, check_input_first
from ragtiller.graph.per_run import NodeMaker, PerRunNodes, daily_limits
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
from ragtiller.rerankers import IdentityReranker, reranker_from_policy
from ragtiller.rerankers.base import Reranker
from ragtiller.stores import Cache, MemoryCache, MemoryQuotaLedger, QuotaLedger, stores_from_env

STEP_BACK = "step-back affordable"
NO_STEP_BACK = "narrow, off or quota spent"
NO_RETRIEVAL = "no retrieval"
RERANK = "rerank: ceiling if quota left, else floor"
NO_RERANK = "no rerank"
# where each named edge goes; the names label the drawn edges
AFTER_GATE_PATHS: dict[Hashable, str] = {
    STEP_BACK: "step_back",
    NO_STEP_BACK: "embed",
    NO_RETRIEVAL: "assemble",
}
AFTER_FUSE_PATHS: dict[Hashable, str] = {RERANK: "rerank", NO_RERANK: "assemble"}


def after_gate(state: dict[str, Any]) -> str:
    """The gate sets ``step_back.status`` active only when step-back can produce something."""
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


def edge(fn: Callable[[dict[str, Any]], Any]) -> Untraced:
    """``fn`` with a native async path, so ``ainvoke`` never hops to a thread to take an edge."""

    async def afn(state: dict[str, Any]) -> Any:
        return fn(state)

    return Untraced(fn, afn)


class IndexLike(Protocol):
    """An embedder and tiers; read if present: ``overview``, ``corpus_map``, ``manifest``."""

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
    shared, per_tenant = daily_limits(policy)
    return stores_from_env(shared, tenant_limits=per_tenant, timezone=policy.quota.timezone)


class GraphParts(TypedDict, total=False):
    """Each optional, overriding the index's own; a ``corpus_map`` text shows only untenanted."""

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
    if tiers is None and isinstance(index, EmbeddedIndex):  # served by the policy's backends
        tiers = tiers_for_policy(resolved, index)
    elif tiers is None:
        tiers = index.tiers if index is not None else []
    base_tiers = [as_tier(t, position) for position, t in enumerate(tiers)]
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

    def reranker_for(other: RetrievalPolicy) -> Reranker:
        if reranker is not None:
            return reranker
        return reranker_from_policy(
            other.reranker, ledger=quota, cache=cache, cache_ttl_s=other.cache.ttl_s
        )

    def variant(other: RetrievalPolicy) -> tuple[dict[str, Tier], Reranker]:
        tiers = apply_query_options(other, base_tiers, index)
        return {t.name: t for t in tiers}, reranker_for(other)

    return Components(
        policy=resolved,
        embedder=emb,
        tiers={t.name: t for t in tier_list},
        quota=quota,
        cache=cache,
        chat_model=chat_model,
        reranker=reranker_for(resolved),
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
    """Build the retrieval graph; no I/O of its own."""
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
    for node in per_run.makers:  # gate, step_back, embed, tier_search, fuse, rerank, assemble
        schema = TierTask if node == "tier_search" else None
        builder.add_node(node, dual(per_run.node(node), node), input_schema=schema)

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


def shape_graph() -> Any:
    deps = Components(
        policy=load_policy(),
        embedder=None,
        tiers={},
        quota=MemoryQuotaLedger({CHAT_RESOURCE: 0}),
        cache=MemoryCache(),
        chat_model=None,
        reranker=IdentityReranker(),
    )
    return compile_graph(deps).get_graph()


def mermaid() -> str:
    return str(shape_graph().draw_mermaid())


def png(path: str | None = None) -> bytes | None:
    """The graph as a PNG (``ragtiller[draw]``): written to ``path``, or returned."""
    try:
        import pygraphviz  # noqa: F401
    except ImportError as e:
        raise ConfigurationError(
            "drawing a PNG needs pygraphviz: pip install 'ragtiller[draw]' "
            "(it compiles against Graphviz: apt-get install graphviz libgraphviz-dev)"
        ) from e
    result = shape_graph().draw_png(path)
    return result if isinstance(result, bytes) else None
