"""Rerank: reorder candidates against the ORIGINAL question; never throws.

The fuse node chose the paid ceiling or the free floor from the turn's quota view. Any failure,
or a provider returning nothing usable, falls back to the fusion order (method ``identity``),
with an error record; assemble then keeps the route's ``top_k``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ragtiller.bulkhead import DeadlineExceeded, Overloaded, within
from ragtiller.nodes.checks import INVALID_OUTPUT, InvalidOutput, check_ranking
from ragtiller.nodes.components import Components, NodeFn
from ragtiller.nodes.deadline import OVERLOADED, TURN_DEADLINE, deadline
from ragtiller.nodes.stage import COULD_NOT_AFFORD, Stage, skipped
from ragtiller.records import RerankOutcome
from ragtiller.rerankers.base import RerankResult
from ragtiller.rerankers.ceiling import CeilingReranker
from ragtiller.rerankers.floor import identity_order
from ragtiller.types import Candidate, StageRecord

if TYPE_CHECKING:
    from ragtiller.graph.state import RetrievalState


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


def ceiling_labels(detail: dict[str, Any]) -> list[str]:
    """The label a ceiling reranker's own skip earns (e.g. ``rerank ceiling skipped: budget``)."""
    reason = detail.get("ceiling_reason")
    if detail.get("ceiling") == "skipped" and reason in COULD_NOT_AFFORD:
        return [f"rerank ceiling skipped: {reason}"]
    return []


def make_rerank(deps: Components) -> NodeFn:
    """Build the rerank node bound to ``deps``."""

    async def call(state: RetrievalState, candidates: list[Candidate]) -> RerankResult:
        provider, query, n = deps.reranker, state["rerank_query"], len(candidates)
        plan = state["rerank"]
        if deps.has_ceiling and plan is not None and plan["mode"] == "floor":
            assert isinstance(provider, CeilingReranker)
            quota = state["turn"]["quota"]
            reason = "quota-store-unavailable" if not quota["available"] else "budget"
            return await provider.afloor(query, candidates, n, reason)
        return await provider.arerank(query, candidates, n)

    def fused_order(candidates: list[Candidate], record: StageRecord) -> dict[str, Any]:
        """The provider failed: the fused order stands."""
        return {
            "ranked": identity_order(candidates, len(candidates)),
            "rerank_outcome": RerankOutcome(
                method="identity", detail={"error": record.get("error")}
            ),
            "stages": [record],
        }

    async def rerank(state: RetrievalState) -> dict[str, Any]:
        candidates = state["candidates"]
        provider = deps.reranker
        limit = deadline(deps.policy, deps.policy.deadlines.rerank_s, state["turn"]["started_at"])
        if limit.expired:
            return fused_order_skipped(candidates)
        stage = Stage("rerank", provider=provider.name, candidates=len(candidates))
        try:
            # The whole list is reordered; assemble picks the distinct best top_k from it.
            result = await within(call(state, candidates), limit.seconds)
            ranked = check_ranking(result.candidates, candidates)
        except DeadlineExceeded:
            record = stage.error(limit.message(), limit.reason, method="identity")
            return fused_order(candidates, record)
        except Overloaded:
            return fused_order(candidates, stage.skip(OVERLOADED, method="identity"))
        except InvalidOutput as e:
            record = stage.error(e, INVALID_OUTPUT, method="identity", provider=provider.name)
            return fused_order(candidates, record)
        except Exception as e:  # the provider broke its never-raise contract: identity fallback
            record = stage.error(e, "provider-failed", method="identity", provider=provider.name)
            return fused_order(candidates, record)
        detail = {**result.detail, "method": result.method}
        labels = ceiling_labels(result.detail)
        if result.error:
            record = stage.error(result.error, "fallback", labels=labels, **detail)
        else:
            record = stage.done(labels=labels, **detail)
        return {
            "ranked": ranked,
            "rerank_outcome": RerankOutcome(method=result.method, detail=result.detail),
            "stages": [record],
        }

    return rerank


def fused_order_skipped(candidates: list[Candidate]) -> dict[str, Any]:
    """No turn time left for rerank: the fused order stands, labelled."""
    return {
        "ranked": identity_order(candidates, len(candidates)),
        "rerank_outcome": RerankOutcome(method="identity", detail={}),
        "stages": [skipped("rerank", TURN_DEADLINE)],
    }
