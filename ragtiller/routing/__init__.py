"""Query routing: the deterministic router (:mod:`ragtiller.routing.rules`) and the optional,
eval-gated LLM router that falls back to it."""

from ragtiller.routing.llm import LLMRouter, RouteChoice, make_llm_router

__all__ = ("LLMRouter", "RouteChoice", "make_llm_router")
