"""The quota drives the edges: a spent budget bypasses the node that could only skip."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from fixtures.fakes import ScriptedChatModel
from test_graph import BROAD, FACTUAL, graph, run

from ragtiller import load_policy
from ragtiller.core.tiers import Candidate
from ragtiller.policies.schema import RerankerConfig
from ragtiller.rerankers import CeilingReranker, ZScoreReranker
from ragtiller.rerankers.base import RerankResult
from ragtiller.stores import MemoryCache, MemoryQuotaLedger, RedisQuotaLedger


def nodes_run(g: Any, query: str) -> list[str]:
    """Node names in LangGraph's own ``updates`` stream, in order."""
    return [name for chunk in g.stream({"query": query}, stream_mode="updates") for name in chunk]


def test_quota_spent_turn_never_enters_step_back() -> None:
    model = ScriptedChatModel()
    quota = MemoryQuotaLedger({"chat_gen": 0, "rerank_calls": 0})
    g = graph(chat_model=model, quota=quota)
    assert "step_back" not in nodes_run(g, BROAD)
    out, _ = run(g, BROAD)
    step = out["manifest"].stage("step_back")
    assert (step.status, step.reason) == ("skipped", "quota")
    assert "step_back skipped: quota" in out["manifest"].degraded
    assert model.calls == 0


def test_quota_left_turn_enters_step_back() -> None:
    g = graph(chat_model=ScriptedChatModel(), quota=MemoryQuotaLedger({"chat_gen": 5}))
    assert "step_back" in nodes_run(g, BROAD)


def test_cached_generalization_is_used_when_the_quota_is_spent() -> None:
    cache = MemoryCache()
    model = ScriptedChatModel()
    quota = MemoryQuotaLedger({"chat_gen": 1})
    g = graph(chat_model=model, quota=quota, cache=cache)
    first, _ = run(g, BROAD)
    assert first["manifest"].step_back.status == "done"
    assert asyncio.run(quota.aremaining("chat_gen")) == 0
    assert "step_back" in nodes_run(g, BROAD)
    second, _ = run(g, BROAD)
    assert second["manifest"].step_back.from_cache
    assert model.calls == 1


def test_unreachable_quota_store_is_labelled_and_bypasses_step_back() -> None:
    quota = RedisQuotaLedger({"chat_gen": 5}, url="redis://127.0.0.1:9/0")  # nothing listens
    g = graph(chat_model=ScriptedChatModel(), quota=quota, cache=MemoryCache())
    assert "step_back" not in nodes_run(g, BROAD)
    out, _ = run(g, BROAD)
    assert out["manifest"].step_back.reason == "quota-store-unavailable"
    assert "step_back skipped: quota-store-unavailable" in out["manifest"].degraded
    assert out["documents"], "a dead quota store costs step-back, not the answer"


class CountingCeiling:
    """A paid reranker that reverses the order and counts its calls."""

    name = "paid"
    has_credentials = True

    def __init__(self) -> None:
        self.calls = 0

    async def arerank(
        self, query: str, candidates: Sequence[Candidate], top_n: int
    ) -> RerankResult:
        self.calls += 1
        ranked = [{**c, "final_score": float(i)} for i, c in enumerate(reversed(candidates))]
        return RerankResult(ranked[:top_n], self.name, {})  # type: ignore[misc]


def ceiling_graph(rerank_calls: int) -> tuple[Any, CountingCeiling]:
    config = RerankerConfig(provider="zscore", ceiling="cohere", require_eval_lift=False)
    quota = MemoryQuotaLedger({"chat_gen": 0, "rerank_calls": rerank_calls})
    paid = CountingCeiling()
    reranker = CeilingReranker(paid, ZScoreReranker(), config, ledger=quota)
    policy = load_policy().model_copy(deep=True)
    routes = {k: v.model_copy(update={"rerank": True}) for k, v in policy.routes.items()}
    return graph(
        policy=policy.model_copy(update={"routes": routes}), quota=quota, reranker=reranker
    ), paid


def test_rerank_edge_takes_the_floor_when_no_paid_call_is_left() -> None:
    g, paid = ceiling_graph(rerank_calls=0)
    out, _ = run(g, FACTUAL)
    rerank = out["manifest"].stage("rerank")
    assert rerank.detail["ceiling"] == "skipped" and rerank.detail["ceiling_reason"] == "budget"
    assert out["manifest"].rerank_method == "zscore"
    assert "rerank ceiling skipped: budget" in out["manifest"].degraded
    assert paid.calls == 0


def test_rerank_edge_takes_the_ceiling_while_calls_are_left() -> None:
    g, paid = ceiling_graph(rerank_calls=3)
    out, _ = run(g, FACTUAL)
    assert out["manifest"].rerank_method == "paid"
    assert paid.calls == 1
    assert out["manifest"].quota_remaining["rerank_calls"] == 2
