"""Rerank: reorder candidates against the ORIGINAL question; never throws.

Any failure, or a provider returning nothing usable, falls back to the fusion order (method
``identity``), with an error event; assemble then keeps the route's ``top_k``.
"""

from __future__ import annotations

from typing import Any

from ragtiller.graph.components import Components, NodeFn
from ragtiller.graph.events import Stage
from ragtiller.graph.state import RetrievalState
from ragtiller.rerankers.floor import identity_order
from ragtiller.types import Candidate


def select_distinct(ranked: list[Candidate], top_n: int) -> list[Candidate]:
    """The best ``top_n`` chunks, skipping any that a better one already contains or is part of.

    The parent-child tier returns whole sections while the other tiers return their child
    chunks; showing both (or the same text twice) would repeat text in the context.
    """
    chosen: list[Candidate] = []
    ids: set[str] = set()
    texts: set[str] = set()
    for cand in ranked:
        if len(chosen) == top_n:
            break
        related = {cand["id"], cand["parent_id"], *cand["metadata"].get("child_ids", [])}
        if (
            related & ids
            or cand["text"] in texts
            or any(c["parent_id"] == cand["id"] for c in chosen)
        ):
            continue
        chosen.append(cand)
        ids.add(cand["id"])
        texts.add(cand["text"])
    return chosen


def make_rerank(deps: Components) -> NodeFn:
    """Build the rerank node bound to ``deps``."""

    async def rerank(state: RetrievalState) -> dict[str, Any]:
        candidates = state["candidates"]
        query = state["rerank_query"]
        provider = deps.reranker
        stage = Stage("rerank", provider=provider.name, candidates=len(candidates))
        try:
            # The whole list is reordered; assemble picks the distinct best top_k from it.
            result = await provider.arerank(query, candidates, len(candidates))
            chunks = result.candidates
            if not chunks:
                raise ValueError("provider returned no candidates")
        except Exception as e:  # the provider broke its never-raise contract: identity fallback
            chunks = identity_order(candidates, len(candidates))
            record = stage.error(e, "provider-failed", method="identity", provider=provider.name)
            return {
                "chunks": chunks,
                "rerank_method": "identity",
                "rerank_detail": {"error": record.get("error")},
                "stages": [record],
            }
        detail = {**result.detail, "rerank_query": query}
        if result.error:
            record = stage.error(
                result.error, "fallback", **{**result.detail, "method": result.method}
            )
        else:
            record = stage.done(**{**result.detail, "method": result.method})
        return {
            "chunks": chunks,
            "rerank_method": result.method,
            "rerank_detail": detail,
            "stages": [record],
        }

    return rerank
