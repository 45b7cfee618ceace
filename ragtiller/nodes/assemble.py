"""Assemble: cited context, LangChain documents, honest labels and the run manifest."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from langchain_core.documents import Document

from ragtiller.graph.components import CHAT_RESOURCE, Components, NodeFn
from ragtiller.graph.events import Stage
from ragtiller.graph.state import RetrievalState
from ragtiller.manifest import Decision, RunManifest, ScoredId, StageSummary, StepBackRecord
from ragtiller.nodes.rerank import select_distinct
from ragtiller.rerankers.floor import identity_order
from ragtiller.types import STAGES, Candidate, StageRecord

COULD_NOT_AFFORD = frozenset(
    {"quota", "budget", "no-credentials", "quota-store-unavailable", "latency"}
)
"""Skip reasons that mean "the turn was worse because something ran out", not "not needed"."""
DESIGNED = "designed"
"""Metadata ``status`` of a document that describes something designed but not built."""
NOT_BUILT_LABEL = "[designed, not built]"


def degradation_labels(stages: list[StageRecord], state: RetrievalState) -> list[str]:
    """Labels for everything that made this turn worse than the policy's best path."""
    labels: list[str] = []
    for record in stages:
        step, reason = record["step"], record["reason"]
        tier = record["detail"].get("tier")
        name = f"{step} ({tier})" if tier else step
        if record["status"] == "skipped" and reason in COULD_NOT_AFFORD:
            labels.append(f"{name} skipped: {reason}")
        elif record["status"] == "error":
            labels.append(f"{name} failed: {reason or 'error'}")
        if step == "gate" and record["detail"].get("router_fallback") in COULD_NOT_AFFORD:
            labels.append(f"llm router skipped: {record['detail']['router_fallback']}")
        ceiling = record["detail"].get("ceiling_reason")
        if (
            step == "rerank"
            and record["detail"].get("ceiling") == "skipped"
            and ceiling in COULD_NOT_AFFORD
        ):
            labels.append(f"rerank ceiling skipped: {ceiling}")
    if any(r["step"] == "embed" and r["status"] == "error" for r in stages):
        labels.append("embed failed: lexical tier only")
    if state.get("query_truncated"):
        labels.append(f"query truncated to {len(state['embed_query'])} characters for embedding")
    return labels


def to_document(rank: int, chunk: Candidate) -> Document:
    """A selected chunk as a LangChain document, scores and provenance in metadata."""
    metadata = {
        **chunk["metadata"],
        "id": chunk["id"],
        "citation": rank,
        "doc_id": chunk["doc_id"],
        "source": chunk["source"],
        "parent_id": chunk["parent_id"],
        "tier_scores": chunk["tier_scores"],
        "fused_score": chunk["fused_score"],
        "final_score": chunk.get("final_score", chunk["fused_score"]),
    }
    return Document(page_content=chunk["text"], metadata=metadata, id=chunk["id"])


def render_context(documents: list[Document], labels: list[str], overview: str | None) -> str:
    """Prompt-ready text: numbered sources, then the overview backstop and the labels."""
    parts: list[str] = []
    for doc in documents:
        meta = doc.metadata
        tag = f" {NOT_BUILT_LABEL}" if meta.get("status") == DESIGNED else ""
        parts.append(
            f"[{meta['citation']}] {meta['source'] or meta['doc_id']}{tag}\n{doc.page_content.strip()}"
        )
    if overview:
        parts.append(f"<project-overview>\n{overview.strip()}\n</project-overview>")
    if labels:
        parts.append("<degraded>\n" + "\n".join(f"- {label}" for label in labels) + "\n</degraded>")
    return "\n\n".join(parts)


def _scored(items: list[Any], key: str) -> list[ScoredId]:
    # model_construct: ids and float scores we just computed need no validation (~100 per turn)
    return [ScoredId.model_construct(id=c["id"], score=float(c[key])) for c in items]


def make_assemble(deps: Components) -> NodeFn:
    """Build the assemble node bound to ``deps``."""
    policy = deps.policy
    candidate_namespaces = sorted(
        {ns for route in policy.routes.values() for ns in route.namespaces}
    )

    async def assemble(state: RetrievalState) -> dict[str, Any]:
        stage = Stage("assemble")
        route = state["route"]
        top_n = route["top_k"]
        candidates = state.get("candidates") or []
        ranked = state.get("chunks") or identity_order(candidates, len(candidates))
        chunks = select_distinct(ranked, top_n)
        documents = [to_document(rank, chunk) for rank, chunk in enumerate(chunks, start=1)]
        step_back = state.get("step_back") or {}
        inject_map = bool(
            route["is_broad"] and step_back.get("status") != "done" and deps.corpus_map
        )
        prior = list(state.get("stages") or [])
        labels = degradation_labels(prior, state)
        designed = sum(1 for d in documents if d.metadata.get("status") == DESIGNED)
        if designed:
            labels.append(f"{designed} source(s) describe designed, not built, features")
        context = render_context(documents, labels, deps.corpus_map if inject_map else None)
        record = stage.done(
            route["no_retrieval_reason"],
            documents=len(documents),
            corpus_map=inject_map,
            degraded=len(labels),
        )
        stages = [*prior, record]
        quota_left = await deps.quota.aremaining(CHAT_RESOURCE)
        manifest = _manifest(state, stages, labels, documents, quota_left, candidate_namespaces)
        return {
            "documents": documents,
            "context": context,
            "manifest": manifest,
            "stages": [record],
        }

    def _manifest(
        state: RetrievalState,
        stages: list[StageRecord],
        labels: list[str],
        documents: list[Document],
        quota_left: int,
        candidate_namespaces: list[str],
    ) -> RunManifest:
        route = state["route"]
        latency: dict[str, float] = {}
        for record in stages:
            latency[record["step"]] = latency.get(record["step"], 0.0) + record["ms"]
        latency["total"] = (time.perf_counter() - state["started_at"]) * 1000.0
        ordered = sorted(stages, key=lambda r: STAGES.index(r["step"]))
        llm_calls = sum(int(r["detail"].get("llm_calls", 0)) for r in stages)
        cost = float((state.get("rerank_detail") or {}).get("cost_usd", 0.0))
        sb = state.get("step_back") or {}
        depth = policy.fusion.tier_depth or policy.budgets.candidate_cap
        return RunManifest(
            run_id=state["run_id"],
            created_at=datetime.now(UTC).isoformat(),
            policy_id=policy.policy_id,
            policy_version=policy.version,
            router="llm" if route["router"] == "llm" else "deterministic",
            router_detail=route["router_detail"],
            query_type=route["query_type"],
            no_retrieval_reason=route["no_retrieval_reason"],
            is_broad=route["is_broad"],
            triggers=route["triggers"],
            embed_query=state.get("embed_query", ""),
            rerank_query=state.get("rerank_query", ""),
            query_truncated=bool(state.get("query_truncated")),
            candidate_namespaces=candidate_namespaces,
            selected_namespaces=route["namespaces"],
            top_k={
                "tier": depth,
                "candidates": policy.budgets.candidate_cap,
                "final": route["top_k"],
            }
            if route["query_type"] != "no_retrieval"
            else {},
            hybrid=Decision(**route["hybrid"]) if route["hybrid"] else None,
            fusion=Decision(**route["fusion"]) if route["fusion"] else None,
            rerank=Decision(
                **{
                    k: v
                    for k, v in state["rerank_decision"].items()
                    if k in ("enabled", "setting", "reason")
                }
            )
            if route["rerank"]
            else None,
            fusion_method=policy.fusion.method if state.get("candidates") else None,
            step_back=StepBackRecord(
                status=sb.get("status", "skipped"),
                reason=sb.get("reason"),
                original=sb.get("original", state.get("query", "")),
                generalized=sb.get("generalized"),
                from_cache=bool(sb.get("from_cache")),
            ),
            tiers={
                tier: _scored(hits, "score")
                for tier, hits in (state.get("tier_hits") or {}).items()
            },
            tier_errors={
                r["detail"]["tier"]: r.get("error", "")
                for r in stages
                if r["step"] == "tier-search" and r["status"] == "error"
            },
            fused=_scored(state.get("candidates") or [], "fused_score"),
            reranked=[
                ScoredId.model_construct(
                    id=d.metadata["id"], score=float(d.metadata["final_score"])
                )
                for d in documents
            ],
            rerank_method=state.get("rerank_method") or ("identity" if documents else None),
            rerank_detail=state.get("rerank_detail") or {},
            latency_ms=latency,
            llm_calls=llm_calls,
            cost_usd=cost,
            quota_remaining={CHAT_RESOURCE: quota_left},
            degraded=labels,
            stages=[StageSummary.model_validate(r) for r in ordered],
        )

    return assemble
