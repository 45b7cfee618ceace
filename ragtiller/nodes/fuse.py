"""Fuse: merge tier hits into a wide list of passages, documents ranked, then decide the rerank edge."""

from __future__ import annotations

from typing import Any

from ragtiller.core.tiers import DENSE, LEXICAL, SearchRequest, StageRecord
from ragtiller.nodes.components import Components, NodeFn
from ragtiller.nodes.run_input import nothing_matched_labels
from ragtiller.nodes.scope import check_tasks_scope
from ragtiller.nodes.stage import Stage, skipped
from ragtiller.nodes.state import RetrievalState
from ragtiller.nodes.tier_search import request_for
from ragtiller.policies.decisions import decide_rerank
from ragtiller.ranking.neighbours import (
    VectorLookup,
    failed_lookup,
    remote_vectors,
    vector_lookup,
)
from ragtiller.ranking.passages import (
    SentenceCoverage,
    passage_hits,
    rank_passages,
    score_misses,
)
from ragtiller.ranking.vector_table import VectorTable


def make_fuse(deps: Components) -> NodeFn:
    """Build the fuse node bound to ``deps``."""
    policy = deps.policy
    cap = policy.budgets.candidate_cap
    mode = policy.fusion.passage_rescore
    rescore = (
        SentenceCoverage.from_tiers(deps.tiers.values(), local=mode == "sentence_local")
        if mode != "off" and policy.fusion.doc_aggregation != "off"
        else None
    )
    rescored = mode if rescore is not None else "off"
    # the lexical tiers' hits may settle an exact match
    lexical = [name for name, role in deps.roles.items() if role == LEXICAL]
    dense = [name for name, role in deps.roles.items() if role == DENSE]
    neighbours = policy.fusion.neighbour_weight > 0
    weights = deps.tier_weights
    # a miss scored by its tier is read by z-score fusion only (margin's z-score turns too)
    exact = policy.fusion.misses == "exact" and policy.fusion.method in ("zscore", "margin")

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
            stage = Stage("fuse", method=policy.fusion.method, tiers=sorted(hits))
            requests = _requests(state)
            # the first dense tier that answered: the one whose vectors the turn reads
            reader = next(
                (n for n in dense if n in hits and n in requests and n in deps.tiers), None
            )
            remote = (
                await _fetch_remote(deps, reader, requests, hits) if exact or neighbours else {}
            )
            missed, report = score_misses(deps.tiers, requests, hits, remote) if exact else ({}, {})
            extra: dict[str, Any] = {"misses": report} if exact else {}
            vectors = _vectors(deps, reader, requests, remote) if neighbours else None
            candidates = rank_passages(
                hits,
                policy.fusion,
                cap=cap,
                query=state["rerank_query"],
                rescore=rescore,
                weights=weights,
                positions=policy.feedback.passage_positions,
                order=policy.feedback.passage_scores,
                missed=missed,
                vectors=vectors,
                report=extra,
            )
            documents = len({(c["metadata"].get("namespace"), c["doc_id"]) for c in candidates})
            records.append(
                stage.done(
                    candidates=len(candidates),
                    documents=documents,
                    cap=cap,
                    rescore=rescored,
                    **extra,
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
        if not plan["enabled"]:  # the edge bypasses the rerank node: say so here
            token = {"token": plan["token"]} if "token" in plan else {}
            records.append(skipped("rerank", plan["reason"], **token))
        return {"candidates": candidates, "rerank": plan, "stages": records}

    return fuse


def _requests(state: RetrievalState) -> dict[str, SearchRequest]:
    """Each searched tier's request, as its tier-search branch made it (the same scope)."""
    return {task["tier"]: request_for(task) for task in state.get("tier_tasks") or []}


async def _fetch_remote(
    deps: Components,
    name: str | None,
    requests: dict[str, SearchRequest],
    hits: dict[str, Any],
) -> dict[str, VectorTable | Exception]:
    """The turn's passage vectors from the dense tier ``name`` when it keeps them remotely
    (Pinecone's ``afetch_vectors``): fetched once, in its request's scope and under its
    deadline, for the exact misses and the neighbours alike; the error when the fetch failed."""
    keeper = None if name is None else remote_vectors(deps.tiers[name])
    if name is None or keeper is None:
        return {}
    ids = [h["id"] for tier_hits in passage_hits(hits).values() for h in tier_hits]
    try:
        return {name: await keeper.afetch_vectors(requests[name], ids)}
    except Exception as e:  # the vectors refine a ranking, never cost the turn
        return {name: e}


def _vectors(
    deps: Components,
    name: str | None,
    requests: dict[str, SearchRequest],
    remote: dict[str, VectorTable | Exception],
) -> VectorLookup | None:
    """The vectors of the dense tier ``name``, read in its own request's scope."""
    if name is None:
        return None
    fetched = remote.get(name)
    if isinstance(fetched, VectorTable):
        return fetched.vectors_of
    if isinstance(fetched, Exception):
        return failed_lookup(fetched)
    return vector_lookup(deps.tiers[name], requests[name])
