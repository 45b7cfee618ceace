"""What ``build_graph`` returns: one compiled LangGraph graph, held by :class:`RetrievalGraph`.

The compiled graph (``.graph``) is LangGraph's own, as ``StateGraph.compile`` made it, with one
addition: its input step checks the caller's input (:func:`check_turn_input`), so a run over
the LangGraph server, which gets ``.graph`` from the Studio factories, is checked as an
in-process one is. The holder adds the sync path: a top-level ``invoke``/``stream`` runs the
async path on the node loop in one hop (:mod:`ragtiller.graph._dual`). Everything else passes
straight to the compiled graph. It is a LangChain ``Runnable``, so it can be a node of a parent
graph, a retriever's or a tool's graph, and ``batch``/``with_config`` work as on any runnable;
``with_config`` also pins the run-context fields under ``configurable["ragtiller"]``, in a
graph recompiled with them in its nodes (:meth:`RetrievalGraph.with_config`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from typing import Any, cast

from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.runnables.config import merge_configs
from langchain_core.runnables.graph import Graph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import StateSnapshot
from pydantic import BaseModel

from ragtiller.graph._dual import invoke_sync, stream_sync
from ragtiller.nodes.run_input import check_keys, current_context
from ragtiller.nodes.scope import asked_scope, check_thread_scope
from ragtiller.policies.run_context import CONFIG_KEY, RunContext, context_from, pinned

THREAD_READS = ("scope",)
"""The thread's channels :func:`check_turn_input` reads."""


def check_turn_input(input: Any, thread: Mapping[str, Any], pin: RunContext | None = None) -> None:
    """Refuse a turn's input before the graph writes it to the state.

    LangGraph keeps only the input keys its schema names, so ``{"question": ...}`` would run as
    an empty turn: it fails instead, with the key and the accepted shapes. A turn that sets a
    field the graph pins (``pin``) differently is refused (:func:`pinned`). A new turn on a
    checkpointed thread is refused when it asks for another scope than the thread's
    (:mod:`ragtiller.nodes.scope`). Both before its question joins the thread's transcript and
    before the thread's earlier values are streamed to it.

    Raises:
        InputError: An input the graph would not read, a pinned field set differently, or a
            scope other than the thread's.
    """
    check_keys(input)
    context = pinned(pin, current_context(), input)
    previous = thread.get("scope")
    if previous is not None:
        check_thread_scope(previous, asked_scope(input, context))


class RetrievalGraph(Runnable[dict[str, Any], dict[str, Any]]):
    """The retrieval graph: input ``{"query": ...}`` or ``{"messages": [...]}``, output
    ``{"documents", "messages", "context", "manifest", "stages"}``.

    Attributes:
        graph: The compiled LangGraph graph (for the LangGraph server, or any API not here).
    """

    def __init__(
        self,
        graph: CompiledStateGraph[Any, Any, Any, Any],
        pinning: Callable[[RunContext], RetrievalGraph],
    ) -> None:
        self.graph = graph
        self.name = graph.name
        self._pinning = pinning

    # --- runs --------------------------------------------------------------------------------

    def invoke(
        self, input: dict[str, Any] | Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        """As LangGraph's ``invoke``, in one hop to the node loop for a top-level run."""
        out: dict[str, Any] = invoke_sync(self.graph, input, config, **kwargs)
        return out

    async def ainvoke(
        self, input: dict[str, Any] | Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        """As LangGraph's ``ainvoke``."""
        out: dict[str, Any] = await self.graph.ainvoke(input, config, **kwargs)
        return out

    def stream(
        self, input: dict[str, Any] | Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> Iterator[Any]:
        """As LangGraph's ``stream``, in one hop to the node loop for a top-level run."""
        return stream_sync(self.graph, input, config, **kwargs)

    def astream(
        self, input: dict[str, Any] | Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> AsyncIterator[Any]:
        """As LangGraph's ``astream``."""
        return self.graph.astream(input, config, **kwargs)

    def astream_events(  # type: ignore[override]
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> AsyncIterator[Any]:
        """As LangGraph's ``astream_events`` (``version="v2"``)."""
        events: AsyncIterator[Any] = self.graph.astream_events(input, config, **kwargs)
        return events

    def with_config(self, config: RunnableConfig | None = None, **kwargs: Any) -> RetrievalGraph:
        """This graph with ``config`` merged into every run's, and the run-context fields under
        ``configurable["ragtiller"]`` pinned: built into the new graph's nodes, so a run that
        sets one differently, through any door, is refused (:func:`pinned`); a later
        ``with_config`` may pin more fields, never change one.

        Raises:
            InputError: A bad run-context field, or one this graph already pins differently.
        """
        merged = merge_configs(config, cast(RunnableConfig, kwargs))
        configurable = dict(merged.get("configurable") or {})
        settings = configurable.pop(CONFIG_KEY, None)
        rest = cast(RunnableConfig, {**merged, "configurable": configurable})
        if settings is None:
            return RetrievalGraph(self.graph.with_config(rest), self._pinning)
        held = self._pinning(context_from(None, {CONFIG_KEY: settings}))
        bound = held.graph.with_config(merge_configs(self.graph.config, rest))
        return RetrievalGraph(bound, held._pinning)

    # --- a thread's state ---------------------------------------------------------------------

    def get_state(self, config: RunnableConfig, *, subgraphs: bool = False) -> StateSnapshot:
        """As LangGraph's ``get_state``."""
        return self.graph.get_state(config, subgraphs=subgraphs)

    async def aget_state(self, config: RunnableConfig, *, subgraphs: bool = False) -> StateSnapshot:
        """As LangGraph's ``aget_state``."""
        return await self.graph.aget_state(config, subgraphs=subgraphs)

    def get_state_history(
        self,
        config: RunnableConfig,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[StateSnapshot]:
        """As LangGraph's ``get_state_history``."""
        return self.graph.get_state_history(config, filter=filter, before=before, limit=limit)

    def aget_state_history(
        self,
        config: RunnableConfig,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[StateSnapshot]:
        """As LangGraph's ``aget_state_history``."""
        return self.graph.aget_state_history(config, filter=filter, before=before, limit=limit)

    def update_state(
        self, config: RunnableConfig, values: dict[str, Any] | Any, as_node: str | None = None
    ) -> RunnableConfig:
        """As LangGraph's ``update_state``."""
        return self.graph.update_state(config, values, as_node)

    async def aupdate_state(
        self, config: RunnableConfig, values: dict[str, Any] | Any, as_node: str | None = None
    ) -> RunnableConfig:
        """As LangGraph's ``aupdate_state``."""
        return await self.graph.aupdate_state(config, values, as_node)

    # --- its shape ----------------------------------------------------------------------------

    def get_graph(self, config: RunnableConfig | None = None, *, xray: int | bool = False) -> Graph:
        """The drawable graph of nodes and edges (``.draw_mermaid()``)."""
        return self.graph.get_graph(config, xray=xray)

    def get_input_schema(self, config: RunnableConfig | None = None) -> type[BaseModel]:
        return self.graph.get_input_schema(config)

    def get_output_schema(self, config: RunnableConfig | None = None) -> type[BaseModel]:
        return self.graph.get_output_schema(config)

    def get_input_jsonschema(self, config: RunnableConfig | None = None) -> dict[str, Any]:
        return self.graph.get_input_jsonschema(config)

    def get_output_jsonschema(self, config: RunnableConfig | None = None) -> dict[str, Any]:
        return self.graph.get_output_jsonschema(config)

    def get_context_jsonschema(self) -> dict[str, Any] | None:
        """The run context's JSON schema (what Studio's configuration panel shows)."""
        return self.graph.get_context_jsonschema()
