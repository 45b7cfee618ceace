"""Fuse: merge tier hits into a wide candidate list, then decide the rerank edge."""

from __future__ import annotations

from typing import Any

from ragtiller.doc_ranking import collapse_to_documents
from ragtiller.fusion import fuse_hits
from ragtiller.graph.components import Components, NodeFn
from ragtiller.graph.edges import decide_rerank
from ragtiller.graph.events import Stage, skipped
from ragtiller.graph.state import RetrievalState
from ragtiller.types import StageRecord


def make_fuse(deps: Components) -> NodeFn:
    """Build the fuse node bound to ``deps``."""
    policy = deps.policy
    cap = policy.budgets.candidate_cap

    async def fuse(state: RetrievalState) -> dict[str, Any]:
        route = state["route"]
        hits = {tier: h for tier, h in (state.get("tier_hits") or {}).items() if h}
        records: list[StageRecord] = []
        if not hits:
            candidates = []
            records.append(skipped("fuse", "no-candidates"))
        else:
            stage = Stage("fuse", method=policy.fusion.method, tiers=sorted(hits))
            candidates = fuse_hits(
                collapse_to_documents(hits, policy.fusion.doc_aggregation),
                method=policy.fusion.method,
                cap=cap,
                rrf_k=policy.fusion.rrf_k,
                weights=policy.fusion.tier_weights or None,
            )
            records.append(stage.done(candidates=len(candidates), cap=cap))
        rerank = decide_rerank(route["rerank"], candidates, hits, route["triggers"], policy)
        if not rerank["enabled"]:
            records.append(
                skipped(
                    "rerank", rerank["reason"], **{k: v for k, v in rerank.items() if k == "token"}
                )
            )
        return {"candidates": candidates, "rerank_decision": rerank, "stages": records}

    return fuse
