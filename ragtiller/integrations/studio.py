"""The graphs LangGraph Studio serves: ``langgraph.json`` points at :func:`make_graph` (the
``RAGTILLER_POLICY`` or default policy) and :func:`make_no_llm_graph` (the shipped ``no-llm``
policy), so Studio users can switch between them; per run, the configuration panel sets the
run context (:class:`~ragtiller.policies.run_context.RunContext`). :func:`make_indexing_graph`
ingests into the saved index the two search (see :mod:`ragtiller.integrations.indexing_graph`).

Both open with no credentials and no network: the index is either one saved on disk
(``RAGTILLER_INDEX``) or a small in-memory index of the standard library's own documentation,
built when the server first needs the graph. Quota ledger, cache and reranker come from the
usual environment (``REDIS_URL``, ``COHERE_API_KEY``) exactly as for :func:`ragtiller.build_graph`.
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
from ragtiller.policies.schema import RetrievalPolicy
from ragtiller.stores import Cache, QuotaLedger

if TYPE_CHECKING:
    from langgraph_sdk.runtime import ServerRuntime

logger = logging.getLogger("ragtiller.integrations.studio")

INDEX_ENV = "RAGTILLER_INDEX"
"""Directory of an index saved by ``ragtiller ingest`` (or ``EmbeddedIndex.save``)."""
EMBEDDER_ENV = "RAGTILLER_EMBEDDER"
"""Embedder of the demo index: ``hashing`` (default) or ``minilm``."""
POLICY_ENV = "RAGTILLER_POLICY"
"""Policy YAML file or shipped policy name; default: the shipped default policy."""
INGEST_ROOT_ENV = "RAGTILLER_INGEST_ROOT"
"""The one directory the indexing graph may read folders and files from; unset: none."""

DEMO_MODULES: tuple[str, ...] = ("asyncio", "json", "pathlib")
"""Modules whose docstrings join the language reference topics in the demo index."""
DEFAULT_EMBEDDER = "hashing"
NO_LLM_POLICY = "no-llm"
"""The shipped policy of Studio's second graph: no model call of any kind."""

_lock = threading.Lock()
_index: EmbeddedIndex | None = None
_graphs: dict[str, CompiledStateGraph] = {}  # type: ignore[type-arg]
_stores: dict[str, tuple[QuotaLedger, Cache]] = {}  # per policy; kept when the index changes


def studio_index(env: Mapping[str, str] = os.environ) -> EmbeddedIndex:
    """The index the Studio graph searches. Blocking: reads files and embeds.

    With ``RAGTILLER_INDEX`` set, the saved index there, opened with the embedder its manifest
    names. Otherwise the language reference topics plus the ``asyncio``, ``json`` and
    ``pathlib`` docstrings (about 170 documents, 1,300 chunks), embedded with
    ``RAGTILLER_EMBEDDER``: ``hashing`` by default, built in about two seconds with no model to
    load (it matches words, not meaning); ``minilm`` embeds with the bundled all-MiniLM-L6-v2
    (needs ``ragtiller[local]``; minutes on a small, busy CPU: save a MiniLM index once with
    ``ragtiller ingest`` and point ``RAGTILLER_INDEX`` at it instead).

    Args:
        env: Where the variables are read.

    Returns:
        The index.

    Raises:
        ConfigurationError: ``RAGTILLER_EMBEDDER`` names an unknown embedder.
        IndexStoreError: ``RAGTILLER_INDEX`` is not a readable index.
    """
    directory = env.get(INDEX_ENV, "").strip()
    if directory:
        logger.info("%s=%s: opening the saved index", INDEX_ENV, directory)
        return open_index(directory)
    kind = env.get(EMBEDDER_ENV, "").strip() or DEFAULT_EMBEDDER
    try:
        embedder = demo_embedder(kind)
    except RagtillerError as e:
        raise ConfigurationError(f"{EMBEDDER_ENV}: {e}") from e
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
    """Build a Studio graph from the environment. Blocking; the factories cache it.

    Args:
        env: Where ``RAGTILLER_INDEX``, ``RAGTILLER_EMBEDDER``, ``RAGTILLER_POLICY`` and the
            Pinecone variables of the policy's ``dense_backend`` / ``lexical_backend`` are read
            (``REDIS_URL`` and ``COHERE_API_KEY`` are always read from ``os.environ``).
        policy: A policy name or path instead of ``RAGTILLER_POLICY``.
        index: An index already opened (the two Studio graphs share one).
        quota: The quota ledger; default: from the environment, as for ``build_graph``.
        cache: The cache; default: as ``quota``.

    Returns:
        The compiled graph the server runs (``build_graph(...).graph``: LangGraph's own, whose
        input step checks the input as in-process runs do), without a checkpointer (the
        server brings its own).

    Raises:
        ConfigurationError: A variable has an invalid value, or the index cannot be opened
            (the message names the variable and says why).
        PolicyError: The policy is not valid.

    Example:
        >>> graph = build_studio_graph({})  # doctest: +SKIP
        >>> graph.invoke({"query": "what is a coroutine?"})["context"][:4]  # doctest: +SKIP
        '[1] '
    """
    chosen: RetrievalPolicy = load_policy(  # fail fast, before the index is built
        policy or env.get(POLICY_ENV, "").strip() or None
    )
    if index is None:
        index = _open(env)
    tiers = tiers_for_policy(chosen, index, env=env)
    return build_graph(chosen, index=index, tiers=tiers, quota=quota, cache=cache).graph


def _open(env: Mapping[str, str]) -> EmbeddedIndex:
    """:func:`studio_index`, with every failure as a ``ConfigurationError`` naming the variable.

    The LangGraph server shows a ``ValueError``'s own message to the Studio user, and hides
    other errors behind "An internal error occurred".
    """
    try:
        return studio_index(env)
    except ConfigurationError:
        raise
    except RagtillerError as e:
        raise ConfigurationError(f"{INDEX_ENV}={env.get(INDEX_ENV, '')!r}: {e}") from e


def _shared_graph(policy: str | None = None) -> CompiledStateGraph:  # type: ignore[type-arg]
    """The process's graph for ``policy``, built on first use; both graphs share the index,
    and each keeps one quota ledger and cache for all its runs, across index changes."""
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
    """After an ingest changed the index: the next run of each graph is built on it."""
    global _index
    with _lock:
        _index = index
        _graphs.clear()


def check_run_context(runtime: ServerRuntime[Any]) -> None:
    """Check a server run's context as strictly as an in-process run does.

    The server keeps only the context keys the graph's schema lists, so a typo (``topk``)
    would reach the graph as nothing at all. The factory sees the context the client sent,
    before that filter: this refuses it there.

    Raises:
        InputError: An unknown field or a bad value, named as for ``graph.invoke``.
    """
    execution = runtime.execution_runtime
    context = getattr(execution, "context", None)
    if isinstance(context, Mapping) and context:
        RunContext(**context)


async def make_graph(runtime: ServerRuntime[Any]) -> CompiledStateGraph:  # type: ignore[type-arg]
    """The graph factory ``langgraph.json`` names as ``ragtiller``.

    The server calls it for every run, and for schemas and state reads. The graph is built
    once per server process, in a worker thread, so the blocking index build never runs on the
    server's event loop (which ``langgraph dev`` polices with ``BlockingError``); later calls
    return the same graph. A run's context is checked first (:func:`check_run_context`).

    Returns:
        The shared compiled graph (``RAGTILLER_POLICY``, or the default policy).
    """
    check_run_context(runtime)
    return await asyncio.to_thread(_shared_graph)


async def make_no_llm_graph(runtime: ServerRuntime[Any]) -> CompiledStateGraph:  # type: ignore[type-arg]
    """The graph factory ``langgraph.json`` names as ``ragtiller_no_llm``: the shipped
    ``no-llm`` policy over the same index.

    Returns:
        The shared compiled graph.
    """
    check_run_context(runtime)
    return await asyncio.to_thread(_shared_graph, NO_LLM_POLICY)


def studio_indexing_graph(
    env: Mapping[str, str] = os.environ,
    *,
    on_ingested: Callable[[EmbeddedIndex], None] | None = None,
) -> CompiledStateGraph:  # type: ignore[type-arg]
    """The indexing graph over ``RAGTILLER_INDEX``, reading folders only under
    ``RAGTILLER_INGEST_ROOT``. Does no I/O; a run does (in a worker thread on the server).

    A new index (``RAGTILLER_INDEX`` missing or empty) is embedded with ``RAGTILLER_EMBEDDER``;
    an existing one keeps the embedder and chunking it was built with.

    Args:
        env: Where the variables are read.
        on_ingested: Called with the index after a run changed it.

    Raises:
        ConfigurationError: ``RAGTILLER_INDEX`` is not set (the demo index is in memory: there
            is nothing to ingest into).
    """
    directory = env.get(INDEX_ENV, "").strip()
    if not directory:
        raise ConfigurationError(
            f"{INDEX_ENV} is not set: the indexing graph ingests into the saved index there "
            "(a missing or empty directory gets a new one), which the retrieval graphs then "
            "search; the in-memory demo index cannot be ingested into"
        )
    root = env.get(INGEST_ROOT_ENV, "").strip()
    kind = env.get(EMBEDDER_ENV, "").strip() or DEFAULT_EMBEDDER

    def new_embedder() -> Embeddings:
        try:
            return demo_embedder(kind)
        except RagtillerError as e:
            raise ConfigurationError(f"{EMBEDDER_ENV}: {e}") from e

    target = IndexingTarget(
        Path(directory),
        ingest_root=Path(root) if root else None,
        new_embedder=new_embedder,
        on_ingested=on_ingested,
        root_name=INGEST_ROOT_ENV,
    )
    return build_indexing_graph(target)


async def make_indexing_graph(runtime: ServerRuntime[Any]) -> CompiledStateGraph:  # type: ignore[type-arg]
    """The graph factory ``langgraph.json`` names as ``ragtiller_indexer``.

    After a run that changed the index, the ``ragtiller`` and ``ragtiller_no_llm`` graphs are
    rebuilt on it at their next run (same quota ledger and cache), so they find what was added.

    Returns:
        The indexing graph (cheap to build: the factory builds it for every run).

    Raises:
        InputError: The run sent a context: the indexing graph takes none.
    """
    context = getattr(runtime.execution_runtime, "context", None)
    if isinstance(context, Mapping) and context:
        keys = ", ".join(map(repr, sorted(context)))
        raise InputError(f"the indexing graph takes no run context, but got {keys}")
    return studio_indexing_graph(os.environ, on_ingested=_use_index)
