"""Keep the intermediate hit lists out of checkpoints, except on runs that may pause.

Tier hits, fused candidates and the rerank order are most of a turn's state (about 300 KB on
the Studio demo index) yet matter only until ``assemble`` has built the documents and the
manifest, which keep every id and score. Their channels become in-memory only: a checkpointer
saves everything else. A thread paused *between* tier search and assemble and resumed from its
checkpoint would have lost them, so a graph built with ``interrupt_before`` keeps them, and so
does every run that sets breakpoints of its own (``interrupt_before``/``interrupt_after`` passed
to ``invoke``/``stream``, as Studio does) or resumes a thread: :func:`graph_for_run` runs those
on a copy of the graph whose hit channels are checkpointed.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Self, TypeVar

from langgraph.channels.binop import BinaryOperatorAggregate
from langgraph.channels.last_value import LastValue
from langgraph.channels.untracked_value import UntrackedValue
from langgraph.graph import StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command

from ragtiller.graph.langgraph_internals import MISSING

HIT_CHANNELS = ("tier_tasks", "tier_hits", "candidates", "ranked")
"""State fields holding per-turn hit lists (and query vectors), untracked by default."""


class UntrackedMerge(UntrackedValue[Any]):
    """A reducer channel that lives only in memory during a run: never checkpointed.

    It is an ``UntrackedValue`` so LangGraph also leaves its writes out of the saved task
    writes (it tests for that class), and it merges parallel writes with ``operator``.
    """

    __slots__ = ("operator",)

    def __init__(self, typ: Any, operator: Callable[[Any, Any], Any]) -> None:
        super().__init__(typ, guard=False)
        self.operator = operator

    def __eq__(self, value: object) -> bool:
        return isinstance(value, UntrackedMerge) and value.operator is self.operator

    __hash__ = None  # type: ignore[assignment]

    def copy(self) -> Self:
        empty = self.__class__(self.typ, self.operator)
        empty.key = self.key
        empty.value = self.value
        return empty

    def from_checkpoint(self, checkpoint: Any) -> Self:
        empty = self.__class__(self.typ, self.operator)
        empty.key = self.key
        return empty

    def update(self, values: Sequence[Any]) -> bool:
        if not values:
            return False
        for value in values:
            self.value = self.operator(None if self.value is MISSING else self.value, value)
        return True


def untrack_hits(builder: StateGraph[Any, Any, Any, Any]) -> None:
    """Make :data:`HIT_CHANNELS` in-memory only, keeping each channel's type and reducer."""
    for name in HIT_CHANNELS:
        channel = builder.channels[name]
        if isinstance(channel, BinaryOperatorAggregate):
            builder.channels[name] = UntrackedMerge(channel.typ, channel.operator)
        else:
            builder.channels[name] = UntrackedValue(channel.typ, guard=False)


G = TypeVar("G", bound=CompiledStateGraph)  # type: ignore[type-arg]
_tracked: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


def _tracking(channel: Any) -> Any:
    """The checkpointed channel an untracked one stands for."""
    if isinstance(channel, UntrackedMerge):
        tracked: Any = BinaryOperatorAggregate(channel.typ, channel.operator)
    else:
        tracked = LastValue(channel.typ)
    tracked.key = channel.key
    return tracked


def may_pause(input: Any, kwargs: Mapping[str, Any]) -> bool:
    """Whether a run sets its own breakpoints or resumes a paused thread."""
    resuming = input is None or isinstance(input, Command)
    return resuming or bool(kwargs.get("interrupt_before") or kwargs.get("interrupt_after"))


def graph_for_run(graph: G, input: Any, kwargs: Mapping[str, Any]) -> G:
    """``graph``, or for a run that may pause (see :func:`may_pause`), its copy whose hit
    channels are checkpointed, so the resumed nodes find what the paused ones wrote."""
    return tracked_twin(graph) if may_pause(input, kwargs) else graph


def tracked_twin(graph: G) -> G:
    """``graph``'s copy whose hit channels are checkpointed (``graph`` when all are).

    What reads or writes a thread's saved state (``get_state``, ``update_state``) goes through
    it: a thread paused by a run of its own holds the hit lists, and the base graph would read
    them as empty (an ``update_state`` would then plan no tier search).
    """
    untracked = {
        name: channel
        for name, channel in graph.channels.items()
        if isinstance(channel, UntrackedValue)
    }
    if not untracked:
        return graph
    twin = _tracked.get(graph)
    if twin is None:
        tracked = {name: _tracking(channel) for name, channel in untracked.items()}
        twin = graph.copy(update={"channels": {**graph.channels, **tracked}})
        _tracked[graph] = twin
    return twin
