"""Edge functions: each reads the decision its source node stored and names where to go.

The decisions themselves are made in :mod:`ragtiller.policies.decisions`, by the node before
the edge, which also announces every stage the edge bypasses; so the event stream always lists
all seven stages in order. Each edge is an ``async`` function as well as a sync one, so an
``ainvoke`` never hops to a worker thread to take an edge.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, Literal

from langgraph.types import Send

from ragtiller.graph.langgraph_internals import RunnableCallable

STEP_BACK = "step-back affordable"
NO_STEP_BACK = "narrow, off or quota spent"
NO_RETRIEVAL = "no retrieval"
RERANK = "rerank: ceiling if quota left, else floor"
NO_RERANK = "no rerank"
AFTER_GATE_PATHS: dict[Hashable, str] = {
    STEP_BACK: "step_back",
    NO_STEP_BACK: "embed",
    NO_RETRIEVAL: "assemble",
}
"""Where each named edge out of the gate goes; the names label the drawn edges."""
AFTER_FUSE_PATHS: dict[Hashable, str] = {RERANK: "rerank", NO_RERANK: "assemble"}
"""Where each named edge out of fuse goes. Ceiling and floor share the rerank node; the fuse
node's decision (``rerank.mode``) says which one runs."""


def after_gate(state: dict[str, Any]) -> str:
    """No retrieval -> assemble; a step-back that may run -> step_back; else embed.

    The gate sets ``step_back.status`` to ``active`` only when the quota view (or the cache)
    lets step-back produce something, so a quota-spent turn never enters the node.
    """
    if state["route"]["query_type"] == "no_retrieval":
        return NO_RETRIEVAL
    if state["step_back"]["status"] == "active":
        return STEP_BACK
    return NO_STEP_BACK


def after_embed(state: dict[str, Any]) -> list[Send] | Literal["fuse"]:
    """One ``Send`` per planned tier (they run in parallel), or straight to fuse when none."""
    tasks = state.get("tier_tasks") or []
    if not tasks:
        return "fuse"
    return [Send("tier_search", task) for task in tasks]


def after_fuse(state: dict[str, Any]) -> str:
    """Rerank (the paid ceiling or the free floor, as the fuse node decided from the quota view)
    or not."""
    return RERANK if state["rerank"]["enabled"] else NO_RERANK


def edge(fn: Callable[[dict[str, Any]], Any]) -> RunnableCallable:
    """``fn`` as an edge with a native async path (no thread hop under ``ainvoke``)."""

    async def afn(state: dict[str, Any]) -> Any:
        return fn(state)

    return RunnableCallable(fn, afn, name=fn.__name__, trace=False)
