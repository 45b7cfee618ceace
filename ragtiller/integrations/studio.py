"""The graphs LangGraph Studio serves (``langgraph.json``, docs/usage.md): two retrieval graphs
and the indexing graph that ingests into the index they search. They open with no credentials
and no network: over the index at ``RAGTILLER_INDEX``, or a small in-memory stdlib index.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_core.embeddings import Embeddings
from langgraph.graph.state import CompiledStateGraph

from ragtiller.errors import ConfigurationError, InputError, RagtillerError
from ragtiller.graph import tiers_for_policy
from ragtiller.graph.builder import build_graph, default_stores
from ragtiller.index import EmbeddedIndex, open_index
from ragtiller.ingest import build_index, stdlib_documents
from ragtiller.integrations.demo import DEMO_CHUNKING, demo_embedder
from ragtiller.integrations.indexing_graph import IndexingTarget, build_indexing_graph
from ragtiller.policies import load_policy
from ragtiller.policies.run_context import RunContext
from ragtiller.stores import Cache, QuotaLedger

if TYPE_CHECKING:
    from langgraph_sdk.runtime import ServerRuntime

logger = logging.getLogger("ragtiller.integrations.studio")

INDEX_ENV = "RAGTILLER_INDEX"
EMBEDDER_ENV = "RAGTILLER_EMBEDDER"  # of the demo index, and of a new one: hashing or minilm
POLICY_ENV = "RAGTILLER_POLICY"
INGEST_ROOT_ENV = "RAGTILLER_INGEST_ROOT"  # the one directory the indexing graph may read
DEMO_MODULES: tuple[str, ...] = ("asyncio", "json", "pathlib")
DEFAULT_EMBEDDER = "hashing"
NO_LLM_POLICY = "no-llm"

_lock = threading.Lock()
_index: EmbeddedIndex | None = None
_graphs: dict[str, CompiledStateGraph] = {}  # type: ignore[type-arg]
_stores: dict[str, tuple[QuotaLedger, Cache]] = {}  # per policy; kept when the index changes


def _embedder(kind: str) -> Embeddings:
    try:
        return demo_embedder(kind)
    except RagtillerError as e:
        raise ConfigurationError(f"{EMBEDDER_ENV}: {e}") from e


def studio_index(env: Mapping[str, str] = os.environ) -> EmbeddedIndex:
    """The saved index at ``RAGTILLER_INDEX``, else a stdlib index embedded with
    ``RAGTILLER_EMBEDDER`` (``minilm`` takes minutes on a small CPU: save such an index once)."""
    directory = env.get(INDEX_ENV, "").strip()
    if directory:
        logger.info("%s=%s: opening the saved index", INDEX_ENV, directory)
        return open_index(directory)
    kind = env.get(EMBEDDER_ENV, "").strip() or DEFAULT_EMBEDDER
    embedder = _embedder(kind)
    documents = stdlib_documents(modules=DEMO_MODULES, include_builtins=False)
    logger.info("building the demo index: %d stdlib documents, %s embedder", len(documents), kind)
    return build_index(documents, embedder=embedder, chunking=DEMO_CHUNKING, progress=False)


def build_studio_graph(
    env: Mapping[str, str] = os.environ,
    *,
    policy: str | None = None,
    index: EmbeddedIndex | None = None,
    quota: QuotaLedger | None = None,
    cache: Cache | None = None,
) -> CompiledStateGraph:  # type: ignore[type-arg]
    """A Studio graph from the environment, without a checkpointer (the server brings its own)."""
    chosen = load_policy(policy or env.get(POLICY_ENV, "").strip() or None)  # before the index
    if index is None:
        index = _open(env)
    tiers = tiers_for_policy(chosen, index, env=env)
    return build_graph(chosen, index=index, tiers=tiers, quota=quota, cache=cache).graph


def _open(env: Mapping[str, str]) -> EmbeddedIndex:
    """:func:`studio_index`, failing as a ``ConfigurationError`` (the server shows its message)."""
    try:
        return studio_index(env)
    except ConfigurationError:
        raise
    except RagtillerError as e:
        raise ConfigurationError(f"{INDEX_ENV}={env.get(INDEX_ENV, '')!r}: {e}") from e


def _shared_graph(policy: str | None = None) -> CompiledStateGraph:  # type: ignore[type-arg]
    """The process's graph for ``policy``, built once; its ledger and cache outlive index changes."""
    global _index
    key = policy or ""
    with _lock:
        if key not in _graphs:
            env = os.environ
            chosen = load_policy(policy or env.get(POLICY_ENV, "").strip() or None)
            if _index is None:  # after the policy: a bad policy fails before the index build
                _index = _open(env)
            if key not in _stores:
                _stores[key] = default_stores(chosen)
            quota, cache = _stores[key]
            _graphs[key] = build_studio_graph(
                env, policy=policy, index=_index, quota=quota, cache=cache
            )
        return _graphs[key]


def _use_index(index: EmbeddedIndex) -> None:
    global _index
    with _lock:
        _index = index
        _graphs.clear()


def _context(runtime: ServerRuntime[Any]) -> Mapping[str, Any]:
    context = getattr(runtime.execution_runtime, "context", None)
    return context if isinstance(context, Mapping) else {}


def check_run_context(runtime: ServerRuntime[Any]) -> None:
    """Check a server run's context as an in-process run does: the server drops keys the schema
    does not list, so a typo (``topk``) would reach the graph as nothing."""
    context = _context(runtime)
    if context:
        RunContext(**context)


async def make_graph(runtime: ServerRuntime[Any]) -> CompiledStateGraph:  # type: ignore[type-arg]
    """The shared graph, built in a worker thread (``langgraph dev`` refuses blocking calls)."""
    check_run_context(runtime)
    return await asyncio.to_thread(_shared_graph)


async def make_no_llm_graph(runtime: ServerRuntime[Any]) -> CompiledStateGraph:  # type: ignore[type-arg]
    check_run_context(runtime)
    return await asyncio.to_thread(_shared_graph, NO_LLM_POLICY)


def studio_indexing_graph(
    env: Mapping[str, str] = os.environ,
    *,
    on_ingested: Callable[[EmbeddedIndex], None] | None = None,
) -> CompiledStateGraph:  # type: ignore[type-arg]
    """The indexing graph over ``RAGTILLER_INDEX``, reading only under ``RAGTILLER_INGEST_ROOT``."""
    directory = env.get(INDEX_ENV, "").strip()
    if not directory:
        raise ConfigurationError(
            f"{INDEX_ENV} is not set: the indexing graph ingests into the saved index there "
            "(a missing or empty directory gets a new one), which the retrieval graphs then "
            "search; the in-memory demo index cannot be ingested into"
        )
    root = env.get(INGEST_ROOT_ENV, "").strip()
    kind = env.get(EMBEDDER_ENV, "").strip() or DEFAULT_EMBEDDER
    target = IndexingTarget(
        Path(directory),
        ingest_root=Path(root) if root else None,
        new_embedder=lambda: _embedder(kind),
        on_ingested=on_ingested,
        root_name=INGEST_ROOT_ENV,
    )
    return build_indexing_graph(target)


async def make_indexing_graph(runtime: ServerRuntime[Any]) -> CompiledStateGraph:  # type: ignore[type-arg]
    """After a run that changed the index, the retrieval graphs are rebuilt on it, same stores."""
    context = _context(runtime)
    if context:
        keys = ", ".join(map(repr, sorted(context)))
        raise InputError(f"the indexing graph takes no run context, but got {keys}")
    return studio_indexing_graph(os.environ, on_ingested=_use_index)
