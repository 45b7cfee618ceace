"""Routing strategies that spend quota: the optional, eval-gated LLM router.

They sit beside the rerankers, above the policies and stores they read; the deterministic
router they fall back to is policy logic (:mod:`ragtiller.routing.rules`).
"""

from ragtiller.routing.llm import LLMRouter, RouteChoice, make_llm_router

__all__ = ("LLMRouter", "RouteChoice", "make_llm_router")
