"""Rerank: narrow the fused pool to the turn's order, against the ORIGINAL question; never throws.

Fuse widened, rerank narrows: the free floor (the z-score floor: documents by their best
passage, the question's positions, each document's passages by their re-score) runs on every
turn with candidates, and the paid ceiling instead when the route lets it and the fuse node saw
quota left. Any failure, or a provider returning nothing usable, falls back to the fusion order
(method ``identity``), with an error record; assemble then keeps the route's ``top_k``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ragtiller.core.bulkhead import DeadlineExceeded, Overloaded, within
from ragtiller.core.tiers import Candidate, StageRecord
from ragtiller.core.turn import RerankDecision, RerankOutcome
from ragtiller.nodes.checks import INVALID_OUTPUT, InvalidOutput, check_ranking
from ragtiller.nodes.components import Components, NodeFn
from ragtiller.nodes.deadline import OVERLOADED, TURN_DEADLINE, deadline
from ragtiller.nodes.stage import COULD_NOT_AFFORD, Stage, skipped
from ragtiller.nodes.state import RetrievalState
from ragtiller.policies.decisions import ceiling_wanted
from ragtiller.ranking.recipe import doc_key
from ragtiller.rerankers.base import RerankResult
from ragtiller.rerankers.ceiling import CeilingReranker
from ragtiller.rerankers.floor import identity_order


@dataclass(frozen=True)
class Selection:
    """The passages a turn returns and what kept it from returning ``wanted``.

    Attributes:
        chosen: The passages, best first.
        wanted: ``top_k``.
        over_cap: Passages skipped because their document already gave ``per_document``.
        repeats: Passages skipped because a chosen one contains them, is part of them, or
            has the same text.
    """

    chosen: list[Candidate]
    wanted: int
    over_cap: int
    repeats: int

    def shortfall_label(self, per_document: int) -> str | None:
        """Why fewer than ``wanted`` came back, or None when all did."""
        if len(self.chosen) >= self.wanted:
            return None
        why = [f"only {len(self.chosen)} distinct passage(s) matched"]
        if self.over_cap:
            why.append(f"{self.over_cap} more over passages_per_document {per_document}")
        if self.repeats:
            why.append(f"{self.repeats} repeating a chosen passage")
        return f"assemble: {len(self.chosen)} of {self.wanted} passages: " + "; ".join(why)


def select_distinct(ranked: list[Candidate], top_n: int, per_document: int) -> Selection:
    """The best ``top_n`` passages, at most ``per_document`` of one document, no text twice.

    A candidate is skipped when a chosen one contains it or is part of it (a parent-child
    window and a child inside it) or has the same text: the context would repeat text.
    """
    chosen: list[Candidate] = []
    ids: set[str] = set()
    texts: set[str] = set()
    related_to_chosen: set[str] = set()  # the chosen ones' parents and children
    per_doc: dict[tuple[str, str], int] = {}
    over_cap = repeats = 0
    for cand in ranked:
        if len(chosen) == top_n:
            break
        children = cand["metadata"].get("child_ids", ())
        if (
            cand["id"] in ids
            or cand["parent_id"] in ids
            or not ids.isdisjoint(children)
            or cand["text"] in texts
            or cand["id"] in related_to_chosen
        ):
            repeats += 1
            continue
        key = doc_key(cand)
        if per_doc.get(key, 0) >= per_document:
            over_cap += 1
            continue
        per_doc[key] = per_doc.get(key, 0) + 1
        chosen.append(cand)
        ids.add(cand["id"])
        texts.add(cand["text"])
        related_to_chosen.update(children)
        if cand["parent_id"] is not None:
            related_to_chosen.add(cand["parent_id"])
    return Selection(chosen, top_n, over_cap, repeats)


def ceiling_labels(detail: dict[str, Any]) -> list[str]:
    """The label a ceiling reranker's own skip earns (e.g. ``rerank ceiling skipped: budget``)."""
    reason = detail.get("ceiling_reason")
    if detail.get("ceiling") == "skipped" and reason in COULD_NOT_AFFORD:
        return [f"rerank ceiling skipped: {reason}"]
    return []


def floor_reason(plan: RerankDecision | None, detail: dict[str, Any]) -> str | None:
    """Why the free floor ordered this turn when the route chose it: ``exact-match`` (its
    token added to ``detail``) or ``route-floor``; None when the ceiling was wanted."""
    if plan is None or ceiling_wanted(plan):
        return None
    if "token" in plan:
        detail["token"] = plan["token"]
        return "exact-match"
    return "route-floor"


def make_rerank(deps: Components) -> NodeFn:
    """Build the rerank node bound to ``deps``."""
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
            # The pool narrows to the candidate cap; assemble picks the distinct best top_k.
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


def fused_order_skipped(candidates: list[Candidate]) -> dict[str, Any]:
    """No turn time left for rerank: the fused order stands, labelled."""
    return {
        "ranked": identity_order(candidates, len(candidates)),
        "rerank_outcome": RerankOutcome(method="identity", detail={}),
        "stages": [skipped("rerank", TURN_DEADLINE)],
    }
