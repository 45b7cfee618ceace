"""The retrieval graph: state, builder and edges."""

from ragtiller.graph.builder import RetrievalGraph, build_graph, compile_graph
from ragtiller.graph.components import Components
from ragtiller.graph.events import EVENT_TYPE
from ragtiller.graph.state import InputState, OutputState, RetrievalState, Route, TierTask

__all__ = (
    "EVENT_TYPE",
    "Components",
    "InputState",
    "OutputState",
    "RetrievalGraph",
    "RetrievalState",
    "Route",
    "TierTask",
    "build_graph",
    "compile_graph",
)
