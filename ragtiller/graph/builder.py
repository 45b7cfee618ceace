"""``build_graph``: wire the seven nodes and the policy-driven edges into one compiled graph."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, TypedDict, Unpack

from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph

from ragtiller.adapters import TierLike, as_tier
from ragtiller.core.tiers import CHAT_RESOURCE, INDEX_TIER_NAMES, RERANK_RESOURCE, Tier, tier_role
from ragtiller.core.turn import TierTask
from ragtiller.errors import ConfigurationError
from ragtiller.graph import edges
from ragtiller.graph._dual import dual
from ragtiller.graph.langgraph_internals import check_input_first
from ragtiller.graph.per_run import NodeMaker, PerRunNodes
from ragtiller.graph.retrieval_graph import THREAD_READS, RetrievalGraph, check_turn_input
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
from ragtiller.rerankers.base import Reranker
from ragtiller.stores import Cache, QuotaLedger


class IndexLike(Protocol):
    """What ``build_graph(index=...)`` reads: an embedder and tiers. An index may also
    offer a corpus outline: ``overview(namespaces, filter)``, cut to a turn's scope (as
    :class:`ragtiller.index.EmbeddedIndex` does), or one ``corpus_map`` text, which is then
    shown only on turns without a tenant."""

    @property
    def embedder(self) -> Embeddings: ...

    @property
    def tiers(self) -> Sequence[TierLike]: ...


def _overview(
    given: str | Overview | None, index: IndexLike | None, namespaces: Sequence[str] | None
) -> Overview | None:
    """The outline a graph shows: the one given, else the index's, scoped when it can be."""
    if given is None and index is not None:
        given = getattr(index, "overview", None) or getattr(index, "corpus_map", None)
    if isinstance(given, str):
        return fixed_overview(given, namespaces) if given else None
    return given


def _tenant_required(given: bool | None, index: IndexLike | None) -> bool:
    """``given``, else whether the index manifest says its documents carry tenants; True
    (default deny) without an index manifest: any other store or tiers may hold several."""
    if given is not None:
        return given
    manifest = getattr(index, "manifest", None)
    return True if manifest is None else bool(manifest.tenanted)


def _known_namespaces(
    namespaces: Sequence[str] | None, index: IndexLike | None
) -> Sequence[str] | None:
    """The namespaces the graph's tiers hold: those given, else the index manifest's."""
    if namespaces is None and index is not None:
        namespaces = getattr(getattr(index, "manifest", None), "namespaces", None)
    return namespaces


def default_stores(policy: RetrievalPolicy) -> tuple[Any, Any]:
    """Redis when ``REDIS_URL`` is set, else in-process; budgets sized by the policy."""
    from ragtiller.stores import stores_from_env

    limits: dict[str, int] = {
        CHAT_RESOURCE: policy.quota.chat_gen_per_day,
        RERANK_RESOURCE: policy.reranker.daily_calls,
    }
    per_tenant = policy.quota.chat_gen_per_tenant_per_day
    tenant_limits: dict[str, int] = {} if per_tenant is None else {CHAT_RESOURCE: per_tenant}
    return stores_from_env(limits, tenant_limits=tenant_limits, timezone=policy.quota.timezone)


class GraphParts(TypedDict, total=False):
    """The components a graph is built from; every one is optional.

    Attributes:
        index: An index providing ``embedder``, ``tiers`` and ``corpus_map`` (e.g.
            :class:`ragtiller.index.EmbeddedIndex`); explicit parts override its own.
        embedder: Any LangChain ``Embeddings``.
        tiers: Retrieval tiers; names must be unique. Any LangChain ``VectorStore`` or
            ``BaseRetriever`` is one too (wrapped by :func:`ragtiller.adapters.as_tier`).
        quota: A :class:`ragtiller.stores.QuotaLedger`; default: Redis when ``REDIS_URL`` is
            set, else in-process, sized by the policy.
        cache: A :class:`ragtiller.stores.Cache`; default: as ``quota``.
        chat_model: Any LangChain chat model for step-back; None skips it (``no-llm``).
        reranker: A rerank provider; default: built from the policy's ``reranker`` section.
        corpus_map: Corpus outline for broad turns: a function of a turn's namespaces and
            tenant filter, or one text (shown only on turns without a tenant, since it cannot
            be cut to one); default: the index's.
        llm_router: An LLM router strategy; default: built from the policy's ``router``
            section (none when ``llm_router: off``). See :mod:`ragtiller.routing.llm`.
    """

    index: IndexLike | None
    embedder: Embeddings | None
    tiers: Sequence[TierLike] | None
    quota: QuotaLedger | None
    cache: Cache | None
    chat_model: BaseChatModel | None
    reranker: Reranker | None
    corpus_map: str | Overview | None
    llm_router: Any | None


def _index_tiers(policy: RetrievalPolicy, index: IndexLike | None) -> Sequence[TierLike]:
    """The index's tiers; for an embedded index, served by the policy's dense and lexical
    backends (Pinecone, with the embedded tier as fallback) as ``tiers_for_policy`` says."""
    from ragtiller.graph import tiers_for_policy
    from ragtiller.index import EmbeddedIndex

    if isinstance(index, EmbeddedIndex):
        return tiers_for_policy(policy, index)
    return list(index.tiers) if index is not None else []


def build_components(
    policy: RetrievalPolicy | str | Path | None = None,
    *,
    namespaces: Sequence[str] | None = None,
    require_tenant: bool | None = None,
    **parts: Unpack[GraphParts],
) -> Components:
    """Resolve the policy and defaults into the :class:`Components` the nodes use.

    Arguments: the policy, ``namespaces`` and ``require_tenant`` as for :func:`build_graph`,
    and the :class:`GraphParts`.

    Raises:
        ConfigurationError: No tiers, duplicate tier names, or vector tiers without an embedder.
        PolicyError: The policy file is invalid.
    """
    index = parts.get("index")
    tiers, embedder = parts.get("tiers"), parts.get("embedder")
    quota, cache = parts.get("quota"), parts.get("cache")
    chat_model, reranker = parts.get("chat_model"), parts.get("reranker")
    corpus_map, llm_router = parts.get("corpus_map"), parts.get("llm_router")
    resolved = policy if isinstance(policy, RetrievalPolicy) else load_policy(policy)
    given = list(tiers) if tiers is not None else _index_tiers(resolved, index)
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
            turn_s=resolved.deadlines.turn_s,
        )
    from ragtiller.rerankers import reranker_from_policy

    given_reranker = reranker

    def variant(other: RetrievalPolicy) -> tuple[dict[str, Tier], Reranker]:
        """The tiers and reranker of ``other``'s fusion, feedback and window, over the same
        parts."""
        tiers = apply_query_options(other, base_tiers, index)
        rerank = given_reranker or reranker_from_policy(other.reranker, ledger=quota, cache=cache)
        return {t.name: t for t in tiers}, rerank

    if reranker is None:
        reranker = reranker_from_policy(resolved.reranker, ledger=quota, cache=cache)
    from ragtiller.graph.backends import fallbacks_for_policy

    return Components(
        policy=resolved,
        embedder=emb,
        tiers={t.name: t for t in tier_list},
        quota=quota,
        cache=cache,
        chat_model=chat_model,
        reranker=reranker,
        overview=_overview(corpus_map, index, _known_namespaces(namespaces, index)),
        llm_router=llm_router,
        variant=variant,
        require_tenant=_tenant_required(require_tenant, index),
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
    """Build the retrieval graph. Does no I/O beyond what the given components do.

    Args:
        policy: A policy object, a YAML path, a shipped policy name, or None for the default.
        checkpointer: Passed to ``compile`` (needed for ``interrupt_before``). It saves the
            whole state after each step, the hit lists included.
        interrupt_before: Node names to pause before (notebook stepping).
        name: The compiled graph's name.
        namespaces: The namespaces the tiers hold; default: the index manifest's. Every
            namespace a policy route names must be one of them; a turn asking for another is
            labelled. None (and no index manifest): not checked.
        require_tenant: Refuse turns that name no tenant (default deny). Default: whether the
            index manifest says its documents carry a ``tenant`` key (``ragtiller ingest``
            records it); True without an index manifest (your own stores and tiers), unless
            you pass False for a store of one tenant, or what ``ingest_to_store`` recorded
            (``require_tenant=records.tenanted()`` with its ``SQLiteRecordManager``).
        **parts: The components (:class:`GraphParts`): ``index``, ``embedder``, ``tiers``,
            ``quota``, ``cache``, ``chat_model``, ``reranker``, ``corpus_map``, ``llm_router``.

    Returns:
        The graph (:class:`~ragtiller.graph.retrieval_graph.RetrievalGraph`, holding the
        compiled LangGraph graph as ``.graph``): input ``{"query": ...}`` or ``{"messages": [...]}``,
        output ``{"documents", "context", "manifest", "stages"}``, run context
        :class:`~ragtiller.policies.run_context.RunContext` (``context={"top_k": 3}``).

    Raises:
        ConfigurationError: No tiers, duplicate tier names, vector tiers without an embedder,
            or a policy route naming a namespace the index does not hold.
        PolicyError: The policy file is invalid.

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
    """Each node's maker, by node name, as the graph builds them (benchmarks call them too)."""
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
    """Wire nodes and edges around already-built components.

    Raises:
        ConfigurationError: A policy route names a namespace not in ``namespaces``.
    """
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
    builder.add_conditional_edges("gate", edges.edge(edges.after_gate), edges.AFTER_GATE_PATHS)
    builder.add_edge("step_back", "embed")
    builder.add_conditional_edges("embed", edges.edge(edges.after_embed), ["tier_search", "fuse"])
    builder.add_edge("tier_search", "fuse")
    builder.add_conditional_edges("fuse", edges.edge(edges.after_fuse), edges.AFTER_FUSE_PATHS)
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
