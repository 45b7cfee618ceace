"""The retrieval graph: its builder, edges, per-run handling, and the tier backends a policy picks."""

from ragtiller.core.turn import Route, TierTask
from ragtiller.graph.backends import tiers_for_policy
from ragtiller.graph.builder import build_components, build_graph, compile_graph
from ragtiller.graph.retrieval_graph import RetrievalGraph
from ragtiller.nodes.components import Components
from ragtiller.nodes.stage import EVENT_TYPE
from ragtiller.nodes.state import (
    CHECKPOINT_TYPES,
    InputState,
    OutputState,
    RetrievalState,
    checkpoint_serde,
)

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
    "tiers_for_policy",
)
