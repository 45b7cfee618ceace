"""Retrieval policies: the schema, the YAML loader, run contexts and the per-turn decisions."""

from ragtiller.policies.loader import load_policy, parse_policy, shipped_policies
from ragtiller.policies.schema import (
    ROUTE_NAMES,
    RetrievalPolicy,
    RouteConfig,
    RouteName,
    Toggle,
    TriggerKind,
)

__all__ = (
    "ROUTE_NAMES",
    "RetrievalPolicy",
    "RouteConfig",
    "RouteName",
    "Toggle",
    "TriggerKind",
    "load_policy",
    "parse_policy",
    "shipped_policies",
)
