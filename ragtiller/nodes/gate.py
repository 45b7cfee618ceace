"""Gate: route the query (no LLM by default), set both query fields, decide the step-back edge."""

from __future__ import annotations

import time
import uuid
from typing import Any

from ragtiller.graph.components import Components, NodeFn
from ragtiller.graph.edges import decide_fusion, decide_hybrid, decide_rerank_setting
from ragtiller.graph.events import Stage, skipped
from ragtiller.graph.state import RetrievalState, Route
from ragtiller.policies.router import Classification, classify
from ragtiller.types import StageName, StageRecord

AFTER_GATE: tuple[StageName, ...] = ("step-back", "embed", "tier-search", "fuse", "rerank")


def _namespaces(state: RetrievalState, route_namespaces: list[str]) -> list[str]:
    override = state.get("namespace")
    if override:
        return [override] if isinstance(override, str) else list(override)
    return route_namespaces


def make_gate(deps: Components) -> NodeFn:
    """Build the gate node bound to ``deps``."""
    policy = deps.policy

    async def gate(state: RetrievalState) -> dict[str, Any]:
        started = time.perf_counter()
        stage = Stage("gate")
        query = state.get("query") or ""
        max_chars = policy.budgets.max_query_chars
        truncated = len(query) > max_chars
        embed_text = query[:max_chars] if truncated else query

        cls: Classification = classify(query[:max_chars], policy)
        router_name, router_detail = "deterministic", {}
        if deps.llm_router is not None and cls.query_type is not None:
            cls, router_name, router_detail = await deps.llm_router(query[:max_chars], cls)

        records: list[StageRecord] = []
        step_back: dict[str, Any] = {
            "status": "skipped",
            "original": query,
            "generalized": None,
            "from_cache": False,
        }
        if cls.query_type is None:
            reason = cls.no_retrieval_reason or "no-retrieval"
            route = Route(
                query_type="no_retrieval",
                no_retrieval_reason=reason,
                is_broad=False,
                triggers=[],
                namespaces=[],
                top_k=0,
                hybrid={},
                fusion={},
                rerank={},
                router=router_name,
                router_detail=router_detail,
            )
            records.append(stage.done(reason, query_type="no_retrieval", router=router_name))
            records.extend(skipped(step, reason) for step in AFTER_GATE)
            step_back["reason"] = reason
        else:
            config = policy.route(cls.query_type)
            labels = cls.trigger_labels
            route = Route(
                query_type=cls.query_type,
                no_retrieval_reason=None,
                is_broad=cls.is_broad,
                triggers=labels,
                namespaces=_namespaces(state, config.namespaces),
                top_k=min(config.top_k, policy.budgets.max_chunks),
                hybrid=decide_hybrid(config, labels),
                fusion=decide_fusion(config, is_broad=cls.is_broad, query_type=cls.query_type),
                rerank=decide_rerank_setting(config),
                router=router_name,
                router_detail=router_detail,
            )
            records.append(
                stage.done(
                    cls.reason,
                    query_type=cls.query_type,
                    is_broad=cls.is_broad,
                    triggers=labels,
                    router=router_name,
                    router_fallback=router_detail.get("fallback_reason"),
                    llm_calls=int(router_detail.get("llm_calls", 0)),
                    namespaces=route["namespaces"],
                )
            )
            if not cls.is_broad:
                step_back["reason"] = "narrow"
            elif not policy.step_back.enabled:
                step_back["reason"] = "disabled"
            else:
                step_back = {**step_back, "status": "active", "reason": None}
            if step_back["status"] == "skipped":
                records.append(skipped("step-back", step_back["reason"]))

        return {
            "run_id": uuid.uuid4().hex,
            "started_at": started,
            "route": route,
            "is_broad": route["is_broad"],
            "embed_query": embed_text,
            "rerank_query": query,
            "query_truncated": truncated,
            "step_back": step_back,
            "query_vector": None,
            "tier_tasks": [],
            "tier_hits": None,
            "candidates": [],
            "chunks": [],
            "rerank_decision": {
                "enabled": False,
                "reason": route["no_retrieval_reason"] or "pending",
            },
            "rerank_method": None,
            "rerank_detail": {},
            "stages": records,
        }

    return gate
