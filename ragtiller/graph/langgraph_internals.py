"""The one module that relies on LangGraph's undocumented behaviour (its ``__pregel_*`` config
keys, checkpoint namespaces, the input step's node); it imports only LangGraph's public API.
CI runs the suite on the lowest and the newest ``langgraph`` of its range, so a change there
fails a test instead of changing behaviour."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from langchain_core.runnables import Runnable, RunnableConfig, ensure_config
from langgraph.constants import START
from langgraph.graph.state import CompiledStateGraph

__all__ = ("Untraced", "check_input_first", "inside_pregel")

NS_SEP = "|"  # LangGraph's checkpoint-namespace separator: a subgraph's namespace holds one


class Untraced(Runnable[Any, Any]):
    """A node or edge body with a sync and a native async path, called with no callback run of
    its own (``RunnableLambda`` records one per call and costs several times more). LangGraph
    takes an ``ainvoke`` override as native async, so ``ainvoke`` never hops to a thread. With
    ``pass_config``, a body gets the run's config as its second argument."""

    def __init__(
        self,
        func: Callable[..., Any],
        afunc: Callable[..., Awaitable[Any]],
        name: str | None = None,
        *,
        pass_config: bool = False,
    ) -> None:
        self.func, self.afunc, self.pass_config = func, afunc, pass_config
        self.name = name or func.__name__

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        if self.pass_config:
            return self.func(input, ensure_config() if config is None else config)
        return self.func(input)

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        if self.pass_config:
            return await self.afunc(input, ensure_config() if config is None else config)
        return await self.afunc(input)


def inside_pregel(configurable: Mapping[str, Any]) -> bool:
    """Whether a run comes from a running Pregel loop (a subgraph call): ``__pregel_*`` keys."""
    return any(key.startswith("__pregel_") for key in configurable)


def check_input_first(
    compiled: CompiledStateGraph[Any, Any, Any, Any],
    check: Callable[[Any, Mapping[str, Any]], None],  # (input, the thread's channels read)
    reads: Sequence[str] = (),
) -> None:
    """Run ``check`` on the input as given before any channel is written (not as a subgraph)."""

    def run(value: dict[str, Any], config: RunnableConfig) -> Any:
        given = value[START]
        if NS_SEP not in config.get("configurable", {}).get("checkpoint_ns", ""):
            check(given, {name: value[name] for name in reads if name in value})
        return given

    async def arun(value: dict[str, Any], config: RunnableConfig) -> Any:
        return run(value, config)

    start = compiled.nodes[START]
    compiled.nodes[START] = start.copy(
        {"channels": [START, *reads], "bound": Untraced(run, arun, pass_config=True)}
    )
