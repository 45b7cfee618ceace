"""The retrieval graph: state, builder and edges."""

from ragtiller.graph.builder import RetrievalGraph, build_components, build_graph, compile_graph
from ragtiller.graph.checkpoint import CHECKPOINT_TYPES, checkpoint_serde
from ragtiller.graph.state import InputState, OutputState, RetrievalState
from ragtiller.nodes.components import Components
from ragtiller.nodes.stage import EVENT_TYPE
from ragtiller.records import Route, TierTask

__all__ = (
    "CHECKPOINT_TYPES",
    "EVENT_TYPE",
    "Components",
    "InputState",
    "OutputState",
    "RetrievalGraph",
    "RetrievalState",
    "Route",
    "TierTask",
    "build_components",
    "build_graph",
    "checkpoint_serde",
    "compile_graph",
)
