"""Step-back through the whole graph: cache, single-flight, quota, validation, failures, Redis."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from fixtures.fakes import ScriptedChatModel, StaticTier, hit
from fixtures.redis_server import RedisServer
from langchain_core.embeddings import DeterministicFakeEmbedding

from ragtiller import build_graph, load_policy
from ragtiller.graph.retrieval_graph import run_sync
from ragtiller.nodes.step_back import StepBackFailed, validate_step_back
from ragtiller.stores import MemoryCache, MemoryQuotaLedger, RedisCache, RedisQuotaLedger

BROAD = "how do I get started with asyncio?"
GENERAL = "What is asynchronous programming in Python?"


def tiers() -> list[StaticTier]:
    return [StaticTier("dense", [hit("dense", f"c{i}", 1 - i / 10) for i in range(4)])]


def graph(model: ScriptedChatModel | None, *, budget: int = 20, **kwargs: Any) -> Any:
    kwargs.setdefault("quota", MemoryQuotaLedger({"chat_gen": budget, "rerank_calls": 10}))
    kwargs.setdefault("cache", MemoryCache())
    return build_graph(
        require_tenant=False,
        tiers=tiers(),
        embedder=DeterministicFakeEmbedding(size=8),
        chat_model=model,
        **kwargs,
    )


def step_back_of(out: dict[str, Any]) -> tuple[str, str | None]:
    record = out["manifest"].stage("step_back")
    return record.status, record.reason


def test_second_identical_turn_is_served_from_cache() -> None:
    model = ScriptedChatModel(reply=GENERAL)
    g = graph(model)
    first, second = (
        g.invoke({"query": BROAD}),
        g.invoke({"query": "  How do I get STARTED with asyncio?  "}),
    )
    assert step_back_of(first) == ("done", "generalized")
    assert step_back_of(second) == ("done", "from-cache")
    assert second["manifest"].step_back.from_cache and second["manifest"].llm_calls == 0
    assert model.calls == 1


async def test_fifty_concurrent_identical_broad_turns_cost_one_call() -> None:
    model = ScriptedChatModel(reply=GENERAL, delay_s=0.05)
    quota = MemoryQuotaLedger({"chat_gen": 20, "rerank_calls": 10})
    g = graph(model, quota=quota)
    outs = await asyncio.gather(*(g.ainvoke({"query": BROAD}) for _ in range(50)))
    assert model.calls == 1
    assert await quota.aremaining("chat_gen") == 19
    assert all(o["manifest"].embed_query == GENERAL for o in outs)
    assert sum(o["manifest"].llm_calls for o in outs) == 1


@pytest.mark.parametrize(
    ("model", "reason"),
    [
        (ScriptedChatModel(error="provider exploded"), "llm-error"),
        (ScriptedChatModel(delay_s=0.5), "timeout"),
        (
            ScriptedChatModel(reply="Sure! Asyncio is a library for writing concurrent code."),
            "invalid-output",
        ),
        (ScriptedChatModel(reply="line one?\nline two?"), "invalid-output"),
        (ScriptedChatModel(reply=""), "invalid-output"),
        (ScriptedChatModel(reply=BROAD), "invalid-output"),
    ],
)
def test_llm_failure_is_a_labelled_no_op(model: ScriptedChatModel, reason: str) -> None:
    policy = load_policy()
    policy = policy.model_copy(
        update={"deadlines": policy.deadlines.model_copy(update={"chat_s": 0.1})}
    )
    out = graph(model, policy=policy).invoke({"query": BROAD})
    assert step_back_of(out) == ("error", reason)
    assert out["manifest"].embed_query == BROAD  # no-op: the original text is embedded
    assert f"step_back failed: {reason}" in out["manifest"].degraded
    assert out["documents"]


def test_a_failed_call_is_not_refunded() -> None:
    quota = MemoryQuotaLedger({"chat_gen": 5, "rerank_calls": 1})
    graph(ScriptedChatModel(error="boom"), quota=quota).invoke({"query": BROAD})
    assert asyncio.run(quota.aremaining("chat_gen")) == 4


def test_spent_day_every_turn_still_returns_documents_labelled() -> None:
    model = ScriptedChatModel(reply=GENERAL)
    g = graph(model, budget=2, corpus_map="asyncio: event loop, tasks")
    queries = [f"how do I get started with topic {i}?" for i in range(5)]
    outs = [g.invoke({"query": q}) for q in queries]
    assert model.calls == 2
    assert [step_back_of(o)[1] for o in outs] == [
        "generalized",
        "generalized",
        "quota",
        "quota",
        "quota",
    ]
    for out in outs[2:]:
        assert out["documents"]
        assert "step_back skipped: quota" in out["manifest"].degraded
        assert "<project-overview>" in out["context"]


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "a?\nb?",
        "x" * 299 + "?" + "y",
        "Answer: it is a library?",
        "Here is the question: what?",
        "no question mark",
    ],
)
def test_validation_rejects_bad_outputs(text: str) -> None:
    with pytest.raises(StepBackFailed):
        validate_step_back("original question?", text)


def test_validation_accepts_and_cleans_one_question() -> None:
    assert (
        validate_step_back("how do I x?", '  "What is X in general?"  ') == "What is X in general?"
    )


def close_all(*stores: RedisQuotaLedger | RedisCache) -> None:
    """Close sync and async clients; the sync graph API uses the async ones on its own loop."""
    for store in stores:
        store.close()
        run_sync(store.aclose)


@pytest.mark.redis
def test_shared_redis_cache_serves_other_replicas(redis_url: str, redis_prefix: str) -> None:
    model = ScriptedChatModel(reply=GENERAL)
    limits = {"chat_gen": 20, "rerank_calls": 5}
    stores = [
        (
            RedisQuotaLedger(limits, url=redis_url, prefix=redis_prefix),
            RedisCache(url=redis_url, prefix=redis_prefix),
        )
        for _ in range(2)
    ]
    outs = [graph(model, quota=q, cache=c).invoke({"query": BROAD}) for q, c in stores]
    close_all(*(store for pair in stores for store in pair))
    assert model.calls == 1
    assert [step_back_of(o)[1] for o in outs] == ["generalized", "from-cache"]


@pytest.mark.redis
def test_redis_stopped_mid_run_turns_still_answer_labelled(
    disposable_redis_server: RedisServer,
) -> None:
    prefix = "midrun:"
    url = disposable_redis_server.url
    model = ScriptedChatModel(reply=GENERAL)
    quota = RedisQuotaLedger({"chat_gen": 20, "rerank_calls": 5}, url=url, prefix=prefix)
    cache = RedisCache(url=url, prefix=prefix, lock_wait_s=0.1)
    g = graph(model, quota=quota, cache=cache)
    before = g.invoke({"query": BROAD})
    assert step_back_of(before) == ("done", "generalized")
    disposable_redis_server.stop()
    after = g.invoke({"query": "how do I get started with sockets?"})
    assert after["documents"]
    assert step_back_of(after) == ("skipped", "quota-store-unavailable")
    assert "step_back skipped: quota-store-unavailable" in after["manifest"].degraded
    assert model.calls == 1
    close_all(quota, cache)
