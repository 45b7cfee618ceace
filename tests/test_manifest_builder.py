"""``build_manifest``: one function turns a turn's state and stage records into its manifest."""

from __future__ import annotations

import time
from typing import Any

from langchain_core.documents import Document

from ragtiller import load_policy
from ragtiller.nodes.assemble import build_manifest
from ragtiller.nodes.stage import record
from ragtiller.policies.decisions import decision


def state(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "query": "how do I start?",
        "turn": {
            "run_id": "r1",
            "started_at": time.perf_counter(),
            "quota": {"chat_left": 3, "rerank_left": 2, "available": True},
        },
        "route": {
            "query_type": "synthesis",
            "no_retrieval_reason": None,
            "is_broad": True,
            "triggers": [],
            "namespaces": ["default"],
            "tenant": None,
            "top_k": 8,
            "truncated": False,
            "hybrid": decision(True, True, "route enables hybrid"),
            "parent_child": decision(False, False, "route disables parent-child"),
            "rerank": decision(True, True, "route enables rerank"),
            "router": "deterministic",
            "router_detail": {},
        },
        "embed_query": "what is asyncio?",
        "rerank_query": "how do I start?",
        "step_back": {
            "status": "done",
            "reason": "generalized",
            "original": "how do I start?",
            "generalized": "what is asyncio?",
            "from_cache": False,
        },
        "tier_hits": {},
        "candidates": [],
        "rerank": {**decision(True, True, "route enables rerank"), "mode": "ceiling"},
        "rerank_outcome": {
            "method": "cohere",
            "detail": {"ceiling": "used", "from_cache": False, "cost_usd": 0.002},
        },
    }
    return base | overrides


def test_labels_latency_and_spends_come_from_the_records() -> None:
    stages = [
        record("assemble", "done", None, ms=1.0),
        record("gate", "done", None, ms=2.0, labels=["llm router skipped: quota"]),
        record("step_back", "done", "generalized", ms=5.0, detail={"llm_calls": 1}),
        record("tier_search", "error", "timeout", ms=3.0, detail={"tier": "dense"}),
        record("tier_search", "done", None, ms=4.0, detail={"tier": "lexical"}),
    ]
    doc = Document("t", metadata={"id": "c1", "final_score": 0.5})
    manifest = build_manifest(state(), stages, [doc], load_policy())  # type: ignore[arg-type]
    assert [s.step for s in manifest.stages] == [
        "gate",
        "step_back",
        "tier_search",
        "tier_search",
        "assemble",
    ]
    assert manifest.degraded == ["llm router skipped: quota", "tier_search (dense) failed: timeout"]
    assert manifest.latency_ms["tier_search"] == 7.0
    assert manifest.llm_calls == 1
    assert manifest.quota_remaining == {"chat_gen": 2, "rerank_calls": 1}
    assert manifest.cost_usd == 0.002
    assert manifest.tier_errors == {"dense": ""}
    assert manifest.rerank is not None and manifest.rerank.enabled
    assert manifest.parent_child is not None and not manifest.parent_child.enabled
    assert [r.id for r in manifest.reranked] == ["c1"]


def test_no_retrieval_turn_asks_no_stage_for_anything() -> None:
    route = state()["route"] | {
        "query_type": "no_retrieval",
        "no_retrieval_reason": "greeting",
        "hybrid": None,
        "parent_child": None,
        "rerank": None,
    }
    manifest = build_manifest(
        state(route=route, rerank=None, rerank_outcome=None),  # type: ignore[arg-type]
        [record("gate", "done", "greeting")],
        [],
        load_policy(),
    )
    assert manifest.top_k == {}
    assert manifest.rerank is None and manifest.rerank_method is None
    assert manifest.no_retrieval_reason == "greeting"
