"""Rerank against the ORIGINAL question (floor, or paid ceiling); a failure keeps fusion order."""

from __future__ import annotations

from typing import Any

from ragtiller.core.bulkhead import DeadlineExceeded, Overloaded, within
from ragtiller.core.tiers import Candidate, StageRecord
from ragtiller.core.turn import RerankDecision, RerankOutcome
from ragtiller.nodes.checks import INVALID_OUTPUT, InvalidOutput, check_ranking
from ragtiller.nodes.components import Components, NodeFn
from ragtiller.nodes.stage import (
    COULD_NOT_AFFORD,
    OVERLOADED,
    TURN_DEADLINE,
    Stage,
    deadline,
    skipped,
)
from ragtiller.nodes.state import RetrievalState
from ragtiller.policies.decisions import ceiling_wanted
from ragtiller.rerankers.base import RerankResult, identity_order
from ragtiller.rerankers.ceiling import CeilingReranker


def floor_reason(plan: RerankDecision | None, detail: dict[str, Any]) -> str | None:
    if plan is None or ceiling_wanted(plan):
        return None
    if "token" in plan:
        detail["token"] = plan["token"]
        return "exact-match"
    return "route-floor"


def fused_order(
    candidates: list[Candidate], record: StageRecord, detail: dict[str, Any] | None = None
) -> dict[str, Any]:
    detail = {"error": record.get("error")} if detail is None else detail
    return {
        "ranked": identity_order(candidates, len(candidates)),
        "rerank_outcome": RerankOutcome(method="identity", detail=detail),
        "stages": [record],
    }


def make_rerank(deps: Components) -> NodeFn:
    cap = deps.policy.budgets.candidate_cap

    async def call(state: RetrievalState, candidates: list[Candidate]) -> RerankResult:
        provider, query, n = deps.reranker, state["rerank_query"], cap
        plan = state["rerank"]
        if isinstance(provider, CeilingReranker) and plan is not None and plan["mode"] == "floor":
            if not ceiling_wanted(plan):  # the route keeps the floor this turn
                return await provider.floor.arerank(query, candidates, n)
            if deps.has_ceiling:  # the fuse node saw no quota left
                quota = state["turn"]["quota"]
                reason = "quota-store-unavailable" if not quota["available"] else "budget"
                return await provider.afloor(query, candidates, n, reason)
        return await provider.arerank(query, candidates, n)

    async def rerank(state: RetrievalState) -> dict[str, Any]:
        candidates = state["candidates"]
        provider = deps.reranker
        limit = deadline(deps.policy, deps.policy.deadlines.rerank_s, state["turn"]["started_at"])
        if limit.expired:
            return fused_order(candidates, skipped("rerank", TURN_DEADLINE), {})
        stage = Stage("rerank", provider=provider.name, candidates=len(candidates))
        try:
            result = await within(call(state, candidates), limit.seconds)
            ranked = check_ranking(result.candidates, candidates)
        except DeadlineExceeded:
            record = stage.error(limit.message(), limit.reason, method="identity")
            return fused_order(candidates, record)
        except Overloaded:
            return fused_order(candidates, stage.skip(OVERLOADED, method="identity"))
        except Exception as e:  # invalid output, or the provider broke its never-raise contract
            why = INVALID_OUTPUT if isinstance(e, InvalidOutput) else "provider-failed"
            record = stage.error(e, why, method="identity", provider=provider.name)
            return fused_order(candidates, record)
        detail = {**result.detail, "method": result.method}
        skip = result.detail.get("ceiling_reason")
        afforded = result.detail.get("ceiling") != "skipped" or skip not in COULD_NOT_AFFORD
        labels = [] if afforded else [f"rerank ceiling skipped: {skip}"]
        reason = floor_reason(state["rerank"], detail)
        if result.error:
            record = stage.error(result.error, "fallback", labels=labels, **detail)
        else:
            record = stage.done(reason, labels=labels, **detail)
        return {
            "ranked": ranked,
            "rerank_outcome": RerankOutcome(method=result.method, detail=result.detail),
            "stages": [record],
        }

    return rerank
