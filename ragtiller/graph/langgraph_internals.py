"""The one module that touches LangGraph's private API; every other module uses its public one.

Each name says why it is needed. ``langgraph`` is pinned to ``>=1.0,<2`` and CI runs the suite
on the lowest and the newest release of that range (``.ci/run``), so a change here shows up as a
failing test, not as a silent change of behaviour.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph._internal._constants import NS_SEP
from langgraph._internal._runnable import RunnableCallable
from langgraph.constants import START
from langgraph.graph.state import CompiledStateGraph

__all__ = ("RunnableCallable", "check_input_first", "inside_pregel")

RunnableCallable = RunnableCallable
"""A node or edge with a sync and an async body and no tracing of its own: what
``add_node``/``add_conditional_edges`` wrap plain functions in. ``RunnableLambda`` would trace
every edge as a child run and costs several times more per call."""

_PREGEL_PREFIX = "__pregel_"

InputCheck = Callable[[Any, Mapping[str, Any]], None]
"""``check(input, thread)``: raise for an input the graph must not run; ``thread`` holds the
channels named by ``reads``, as the thread's last turn left them (empty without a thread)."""


def inside_pregel(configurable: Mapping[str, Any]) -> bool:
    """Whether a run's ``configurable`` comes from a running Pregel loop (a subgraph call, a
    node calling the graph), which marks it with ``__pregel_*`` keys."""
    return any(key.startswith(_PREGEL_PREFIX) for key in configurable)


def check_input_first(
    compiled: CompiledStateGraph[Any, Any, Any, Any], check: InputCheck, reads: Sequence[str] = ()
) -> None:
    """Make ``compiled``'s input step run ``check`` on the caller's input as it was given.

    LangGraph's ``START`` step copies the input into the state channels, keeping only the keys
    the input schema names, so no node can see an unknown key. ``check`` runs in that step
    instead, on every path that runs the graph (``invoke``, ``stream``, the LangGraph server),
    before any state channel is written or any value streamed. It does not run when the graph
    runs as a subgraph (the parent's whole state is its input then), nor for a resume (there is
    no new input).
    """

    def run(value: dict[str, Any], config: RunnableConfig) -> Any:
        given = value[START]
        if NS_SEP not in config.get("configurable", {}).get("checkpoint_ns", ""):
            check(given, {name: value[name] for name in reads if name in value})
        return given

    async def arun(value: dict[str, Any], config: RunnableConfig) -> Any:
        return run(value, config)

    start = compiled.nodes[START]
    compiled.nodes[START] = start.copy(
        {"channels": [START, *reads], "bound": RunnableCallable(run, arun, trace=False)}
    )
