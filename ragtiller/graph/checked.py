"""The compiled graph, with its input checked before LangGraph drops unknown keys, and a
thread's scope checked before LangGraph writes the input to the thread.

LangGraph keeps only the input keys its schema names, so ``{"question": ...}`` would run as an
empty turn. A top-level call fails instead, with the key and the accepted shapes. A call from a
parent graph (as a subgraph node) passes the parent's whole state, so there extra keys are the
parent's own and are ignored.

A new turn on a checkpointed thread is refused when it asks for another scope than the
thread's (:mod:`ragtiller.nodes.scope`), here rather than only at the gate: by the gate's step,
LangGraph has already saved the input (a chat question) to the thread and streamed the thread's
earlier values. The check costs one read of the thread's state per such turn.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Mapping
from typing import Any

from langchain_core.runnables import RunnableConfig, ensure_config
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command

from ragtiller.graph.untracked import graph_for_run, tracked_twin
from ragtiller.nodes.run_input import check_keys
from ragtiller.nodes.scope import Scope, asked_scope, check_thread_scope
from ragtiller.policies.run_context import RunContext, context_from


def _check(input: Any, config: RunnableConfig | None) -> None:
    if input is None or isinstance(input, Command):  # resuming a paused thread
        return
    if ensure_config(config).get("configurable", {}).get("checkpoint_ns"):
        return  # called by a parent graph
    check_keys(input)


def _new_turn_scope(input: Any, config: RunnableConfig | None, kwargs: Any) -> Scope | None:
    """The scope a new turn on a thread asks for; None for a run that starts no such turn (no
    thread, a resume, or a call from a parent graph)."""
    if input is None or isinstance(input, Command):
        return None
    configurable = ensure_config(config).get("configurable", {})
    if configurable.get("checkpoint_ns") or configurable.get("thread_id") is None:
        return None
    given = kwargs.get("context")
    context = RunContext(**given) if isinstance(given, Mapping) else given
    return asked_scope(input, context_from(context, configurable))


class CheckedGraph(CompiledStateGraph):  # type: ignore[type-arg]
    """A compiled retrieval graph whose ``stream``/``astream`` (and so ``invoke``/``ainvoke``)
    raise :class:`~ragtiller.errors.InputError` for input the graph would not read, or for a
    turn whose scope differs from its thread's."""

    def stream(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        _check(input, config)
        graph = graph_for_run(self, input, kwargs)
        if graph is not self:
            return graph.stream(input, config, **kwargs)
        scope = _new_turn_scope(input, config, kwargs)
        if scope is not None:
            try:
                previous = self.get_state(config or {}).values.get("scope")
            except ValueError:  # no checkpointer: no thread to keep
                previous = None
            check_thread_scope(previous, scope)
        return super().stream(input, config, **kwargs)

    def astream(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        _check(input, config)
        graph = graph_for_run(self, input, kwargs)
        if graph is not self:
            return graph.astream(input, config, **kwargs)
        scope = _new_turn_scope(input, config, kwargs)
        if scope is None:
            return super().astream(input, config, **kwargs)
        return self._astream_in_scope(scope, input, config, **kwargs)

    async def _astream_in_scope(
        self, scope: Scope, input: Any, config: RunnableConfig | None, **kwargs: Any
    ) -> AsyncIterator[Any]:
        try:
            previous = (await self.aget_state(config or {})).values.get("scope")
        except ValueError:  # no checkpointer: no thread to keep
            previous = None
        check_thread_scope(previous, scope)
        async for part in super().astream(input, config, **kwargs):
            yield part


STATE_METHODS = (
    "get_state",
    "aget_state",
    "get_state_history",
    "aget_state_history",
    "update_state",
    "aupdate_state",
    "bulk_update_state",
    "abulk_update_state",
)
"""What reads or writes a thread's saved state: each goes through the graph's twin whose hit
lists are checkpointed (:func:`~ragtiller.graph.untracked.tracked_twin`)."""


def _through_twin(name: str) -> Any:
    base = getattr(CompiledStateGraph, name)

    @functools.wraps(base)
    def method(self: CompiledStateGraph, *args: Any, **kwargs: Any) -> Any:  # type: ignore[type-arg]
        return base(tracked_twin(self), *args, **kwargs)

    return method


for _name in STATE_METHODS:
    setattr(CheckedGraph, _name, _through_twin(_name))
