"""Fuse: the turn's candidate table, Rocchio feedback's second dense search, the fused pool (fuse
widens, rerank narrows), and the rerank edge's decision."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from ragtiller.core.bulkhead import within
from ragtiller.core.tiers import DENSE, LEXICAL, StageRecord
from ragtiller.index.dense_tier import DenseTier
from ragtiller.nodes.components import Components, NodeFn
from ragtiller.nodes.run_input import nothing_matched_labels
from ragtiller.nodes.scope import check_tasks_scope
from ragtiller.nodes.stage import Stage, skipped
from ragtiller.nodes.state import RetrievalState
from ragtiller.nodes.tier_search import request_for
from ragtiller.policies.decisions import decide_rerank
from ragtiller.ranking.recipe import (
    CandidateTable,
    SentenceCoverage,
    feedback_passages,
    place,
    rescore,
    rocchio_vector,
)
from ragtiller.ranking.recipe import fuse as fuse_table


def make_fuse(deps: Components) -> NodeFn:
    policy = deps.policy
    cap = policy.budgets.candidate_cap
    fusion = policy.fusion
    weights = deps.tier_weights
    coverage = SentenceCoverage.from_tiers(deps.tiers.values())
    # the lexical tiers' hits may settle an exact match
    lexical = [name for name, role in deps.roles.items() if role == LEXICAL]
    dense = next((name for name, role in deps.roles.items() if role == DENSE), None)
    # Rocchio moves the embedded dense tier: its vectors are at hand
    moves = None if dense is None else deps.tiers[dense]
    rocchio = moves if isinstance(moves, DenseTier) and policy.feedback.enabled else None

    async def feedback(table: CandidateTable, state: RetrievalState) -> tuple[CandidateTable, str]:
        """Rocchio: the first pass's best documents move the question's vector and the dense
        tier searches again; the first pass stands when it cannot."""
        tasks = {task["tier"]: task for task in state.get("tier_tasks") or []}
        if rocchio is None or dense not in table.tiers or dense not in tasks:
            return table, "off" if rocchio is None else "skipped: no dense first pass"
        task = tasks[dense]
        request = request_for(task)
        assert request.vector is not None  # the dense tier searched with it
        ids = feedback_passages(
            table,
            dense,
            next((name for name in lexical if name in table.tiers), None),
            docs=policy.feedback.dense_docs,
            method=fusion.method,
            rrf_k=fusion.rrf_k,
            weights=weights,
        )
        try:
            _, rows = rocchio.vectors_of(request, ids)
            moved = rocchio_vector(request.vector, rows, weight=policy.feedback.dense_weight)
            second = rocchio.asearch_moved(replace(request, k=cap), moved)
            hits = await within(second, task["deadline_s"])
            found, block = rocchio.vectors_of(request, [h["id"] for h in hits])
        except Exception as e:  # feedback improves a ranking, never costs the turn
            return table, f"failed: {type(e).__name__}: {e}"
        query = np.asarray(request.vector, dtype=np.float32)
        query = query / (np.linalg.norm(query) or np.float32(1.0))
        question = dict(zip(found, (block @ query).tolist(), strict=True))
        return table.moved(dense, hits, question), f"rocchio: {len(ids)} documents"

    async def fuse(state: RetrievalState) -> dict[str, Any]:
        route = state["route"]
        check_tasks_scope(state.get("tier_tasks") or [], route)  # its vector reads' scope
        hits = {tier: h for tier, h in (state.get("tier_hits") or {}).items() if h}
        records: list[StageRecord] = []
        if not hits:
            candidates = []
            tier_hits = state.get("tier_hits") or {}
            labels = nothing_matched_labels(state["route"]["tenant"], tier_hits)
            records.append(skipped("fuse", "no-candidates", labels=labels))
        else:
            stage = Stage("fuse", method=fusion.method, tiers=sorted(hits))
            table, moved = await feedback(CandidateTable(hits), state)
            table = table.head(cap)
            how: dict[str, Any] = {
                "method": fusion.method,
                "rrf_k": fusion.rrf_k,
                "weights": weights,
            }
            candidates = place(table, fuse_table(table, **how), **how)
            candidates = rescore(candidates, state["rerank_query"], coverage, depth=cap)
            documents = len({(c["metadata"].get("namespace"), c["doc_id"]) for c in candidates})
            records.append(
                stage.done(
                    candidates=len(candidates),
                    documents=documents,
                    cap=cap,
                    feedback=moved,
                    rescore=coverage is not None,
                )
            )
        assert route["rerank"] is not None  # set by the gate on every retrieval route
        plan = decide_rerank(
            route["rerank"],
            candidates,
            [hits[name] for name in lexical if name in hits],
            route["triggers"],
            policy,
            has_ceiling=deps.has_ceiling,
            quota=state["turn"]["quota"],
        )
        return {"candidates": candidates, "rerank": plan, "stages": records}

    return fuse
