"""The compiled graph, with its input checked before LangGraph drops unknown keys.

LangGraph keeps only the input keys its schema names, so ``{"question": ...}`` would run as an
empty turn. A top-level call fails instead, with the key and the accepted shapes. A call from a
parent graph (as a subgraph node) passes the parent's whole state, so there extra keys are the
parent's own and are ignored.
"""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig, ensure_config
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command

from ragtiller.graph.untracked import graph_for_run
from ragtiller.nodes.run_input import check_keys


def _check(input: Any, config: RunnableConfig | None) -> None:
    if input is None or isinstance(input, Command):  # resuming a paused thread
        return
    if ensure_config(config).get("configurable", {}).get("checkpoint_ns"):
        return  # called by a parent graph
    check_keys(input)


class CheckedGraph(CompiledStateGraph):  # type: ignore[type-arg]
    """A compiled retrieval graph whose ``stream``/``astream`` (and so ``invoke``/``ainvoke``)
    raise :class:`~ragtiller.errors.InputError` for input the graph would not read."""

    def stream(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        _check(input, config)
        graph = graph_for_run(self, input, kwargs)
        if graph is not self:
            return graph.stream(input, config, **kwargs)
        return super().stream(input, config, **kwargs)

    def astream(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        _check(input, config)
        graph = graph_for_run(self, input, kwargs)
        if graph is not self:
            return graph.astream(input, config, **kwargs)
        return super().astream(input, config, **kwargs)
