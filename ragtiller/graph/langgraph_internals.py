"""The one module that touches LangGraph's private API; every other module uses its public one.

Each name says why it is needed. ``langgraph`` is pinned to ``>=1.0,<2`` and CI runs the suite
on the lowest and the newest release of that range (``.ci/run``), so a change here shows up as a
failing test, not as a silent change of behaviour.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from langgraph._internal._runnable import RunnableCallable
from langgraph._internal._typing import MISSING
from langgraph.graph.state import CompiledStateGraph

__all__ = ("MISSING", "RunnableCallable", "inside_pregel", "rebrand")

RunnableCallable = RunnableCallable
"""A node or edge with a sync and an async body and no tracing of its own: what
``add_node``/``add_conditional_edges`` wrap plain functions in. ``RunnableLambda`` would trace
every edge as a child run and costs several times more per call."""

MISSING = MISSING
"""The "no value yet" sentinel of LangGraph's channels, which a channel subclass must test for."""

_PREGEL_PREFIX = "__pregel_"
G = TypeVar("G", bound=CompiledStateGraph[Any, Any, Any, Any])


def inside_pregel(configurable: Mapping[str, Any]) -> bool:
    """Whether a run's ``configurable`` comes from a running Pregel loop (a subgraph call, a
    node calling the graph), which marks it with ``__pregel_*`` keys."""
    return any(key.startswith(_PREGEL_PREFIX) for key in configurable)


def rebrand(compiled: CompiledStateGraph[Any, Any, Any, Any], cls: type[G]) -> G:
    """``compiled`` as an instance of ``cls``, a subclass that overrides entry points only.

    ``StateGraph.compile`` builds its own ``CompiledStateGraph``; swapping the class of that one
    object keeps every attribute compile set, where re-creating it would have to copy them.
    """
    if not issubclass(cls, type(compiled)):
        raise TypeError(f"{cls.__name__} is not a subclass of {type(compiled).__name__}")
    compiled.__class__ = cls
    return compiled  # type: ignore[return-value]
