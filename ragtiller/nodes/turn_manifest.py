"""The run manifest, built by one function from the turn's state and its stage records."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from langchain_core.documents import Document

from ragtiller.core.run_manifest import RunManifest
from ragtiller.core.tiers import CHAT_RESOURCE, RERANK_RESOURCE, STAGES, StageRecord
from ragtiller.core.turn import Decision as DecisionRecord
from ragtiller.nodes.state import RetrievalState
from ragtiller.policies.schema import RetrievalPolicy


def _scored(items: list[Any], key: str) -> list[dict[str, Any]]:
    return [{"id": c["id"], "score": float(c[key])} for c in items]


def _decision(record: DecisionRecord | None) -> dict[str, Any] | None:
    if record is None:
        return None
    return {"enabled": record["enabled"], "setting": record["setting"], "reason": record["reason"]}


def build_manifest(
    state: RetrievalState,
    stages: list[StageRecord],
    documents: list[Document],
    policy: RetrievalPolicy,
) -> RunManifest:
    """Everything the turn decided, retrieved and spent, from its state and stage records.

    ``degraded`` is every record's labels, in stage order; ``quota_remaining`` is the gate's
    quota read less what this turn spent (of the tenant's own chat budget under a per-tenant
    limit, as ``quota_budget`` says). The manifest and its nested records are validated
    from plain data in one pass (a hundred or more scored ids a turn: one pydantic-core call,
    not a Python constructor call per id).
    """
    route, turn = state["route"], state["turn"]
    ordered = sorted(stages, key=lambda r: STAGES.index(r["step"]))
    latency: dict[str, float] = {}
    for record in ordered:
        latency[record["step"]] = latency.get(record["step"], 0.0) + record["ms"]
    latency["total"] = (time.perf_counter() - turn["started_at"]) * 1000.0
    llm_calls = sum(int(r["detail"].get("llm_calls", 0)) for r in stages)
    outcome = state.get("rerank_outcome")
    rerank_detail = outcome["detail"] if outcome else {}
    paid = (
        1 if rerank_detail.get("ceiling") == "used" and not rerank_detail.get("from_cache") else 0
    )
    quota = turn["quota"]
    own = quota.get("tenant_chat_left")  # a tenant's own budget, never moved by another's turns
    plan = state.get("rerank")
    retrieved = route["query_type"] != "no_retrieval"
    sb = state["step_back"]
    bound = policy.budgets.max_query_chars  # a huge query is cut, as for embedding, not copied
    data: dict[str, Any] = dict(
        run_id=turn["run_id"],
        created_at=datetime.now(UTC).isoformat(),
        policy_id=policy.policy_id,
        policy_version=policy.version,
        overrides=turn.get("overrides", {}),
        router=route["router"],
        router_detail=route["router_detail"],
        query_type=route["query_type"],
        no_retrieval_reason=route["no_retrieval_reason"],
        is_broad=route["is_broad"],
        triggers=route["triggers"],
        embed_query=state.get("embed_query", ""),
        rerank_query=state.get("rerank_query", "")[:bound],
        query_truncated=route["truncated"],
        candidate_namespaces=sorted(
            {ns for config in policy.routes.values() for ns in config.namespaces}
        ),
        selected_namespaces=route["namespaces"],
        tenant=route["tenant"],
        top_k={
            "tier": policy.tier_hits,
            "candidates": policy.budgets.candidate_cap,
            "final": route["top_k"],
        }
        if retrieved
        else {},
        hybrid=_decision(route["hybrid"]),
        parent_child=_decision(route["parent_child"]),
        rerank=_decision(plan),
        fusion_method=policy.fusion.method if state.get("candidates") else None,
        step_back={
            "status": sb["status"],
            "reason": sb["reason"],
            "original": sb["original"][:bound],
            "generalized": sb["generalized"],
            "from_cache": sb["from_cache"],
        },
        tiers={tier: _scored(hits, "score") for tier, hits in state.get("tier_hits", {}).items()},
        tier_errors={
            r["detail"]["tier"]: r.get("error", "")
            for r in stages
            if r["step"] == "tier_search" and r["status"] == "error"
        },
        fused=_scored(state.get("candidates") or [], "fused_score"),
        reranked=[
            {"id": d.metadata["id"], "score": float(d.metadata["final_score"])} for d in documents
        ],
        rerank_method=outcome["method"] if outcome else ("identity" if documents else None),
        rerank_detail=rerank_detail,
        latency_ms=latency,
        llm_calls=llm_calls,
        cost_usd=float(rerank_detail.get("cost_usd", 0.0)),
        quota_remaining={
            CHAT_RESOURCE: max(0, (quota["chat_left"] if own is None else own) - llm_calls),
            RERANK_RESOURCE: max(0, quota["rerank_left"] - paid),
        },
        quota_budget={
            CHAT_RESOURCE: "shared" if own is None else "tenant",
            RERANK_RESOURCE: "shared",
        },
        degraded=[label for record in ordered for label in record["labels"]],
        stages=ordered,
    )
    return RunManifest.model_validate(data)
