"""Retrieval policies: the schema, the YAML loader and the deterministic router."""

from ragtiller.policies.llm_router import LLMRouter, RouteChoice, make_llm_router
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
    "LLMRouter",
    "RetrievalPolicy",
    "RouteChoice",
    "RouteConfig",
    "RouteName",
    "Toggle",
    "TriggerKind",
    "load_policy",
    "make_llm_router",
    "parse_policy",
    "shipped_policies",
)
