"""The one module that touches LangGraph's private API; CI runs the suite on the lowest and the
newest ``langgraph`` of its range, so a change here fails a test instead of changing behaviour."""

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
"""A node or edge with a sync and an async body and no tracing of its own (what ``add_node``
wraps functions in); ``RunnableLambda`` would trace every edge and costs several times more."""

_PREGEL_PREFIX = "__pregel_"

InputCheck = Callable[[Any, Mapping[str, Any]], None]  # (input, the thread's channels read)


def inside_pregel(configurable: Mapping[str, Any]) -> bool:
    """Whether a run comes from a running Pregel loop (a subgraph call): ``__pregel_*`` keys."""
    return any(key.startswith(_PREGEL_PREFIX) for key in configurable)


def check_input_first(
    compiled: CompiledStateGraph[Any, Any, Any, Any], check: InputCheck, reads: Sequence[str] = ()
) -> None:
    """Make ``compiled``'s ``START`` step, which keeps only the input keys the schema names, run
    ``check`` on the input as given first: on every path (``invoke``, the LangGraph server),
    before any channel is written. Not as a subgraph (the parent's state is its input), nor on
    a resume (no new input)."""

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
