"""A whole graph on a Redis frozen by SIGSTOP: the first turns pay the socket timeout, then the
shared breaker makes the store cost about nothing, and service comes back by itself."""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest
from fixtures.fakes import ScriptedChatModel, StaticTier, hit
from fixtures.redis_server import RedisServer
from langchain_core.embeddings import DeterministicFakeEmbedding

from ragtiller import build_graph
from ragtiller.stores import CircuitBreaker, RedisCache, RedisQuotaLedger
from ragtiller.stores._redis import DEFAULT_SOCKET_TIMEOUT_S

pytestmark = pytest.mark.redis

GENERAL = "What is asynchronous programming in Python?"
NARROW = "asyncio.gather"
RESET_S = 1.0


def broad(i: int) -> str:
    return f"how do I get started with asyncio task groups, take {i}?"


def _turn(graph: Any, query: str) -> tuple[Any, float]:
    began = time.perf_counter()
    out = graph.invoke({"query": query})
    return out["manifest"], time.perf_counter() - began


def test_a_frozen_redis_costs_the_first_turns_a_timeout_then_nothing(
    disposable_redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    url = disposable_redis_server.url
    breaker = CircuitBreaker(reset_after_s=RESET_S)
    quota = RedisQuotaLedger({"chat_gen": 20, "rerank_calls": 10}, url=url, breaker=breaker)
    cache = RedisCache(url=url, breaker=breaker)
    graph = build_graph(
        require_tenant=False,
        tiers=[StaticTier("dense", [hit("dense", f"c{i}", 1 - i / 10) for i in range(4)])],
        embedder=DeterministicFakeEmbedding(size=8),
        chat_model=ScriptedChatModel(reply=GENERAL),
        quota=quota,
        cache=cache,
    )
    try:
        assert _turn(graph, broad(0))[0].stage("step_back").status == "done"
        disposable_redis_server.freeze()
        caplog.set_level(logging.ERROR, logger="ragtiller.stores")

        first = [_turn(graph, q) for q in (broad(1), NARROW)]
        assert sum(took for _, took in first) < 3 * DEFAULT_SOCKET_TIMEOUT_S + 0.5
        assert breaker.snapshot().state == "open"

        for i in range(2, 12):
            manifest, took = _turn(graph, broad(i) if i % 2 else NARROW)
            assert took < 0.25, f"turn {i} took {took:.3f} s with the breaker open"
            if i % 2:
                assert manifest.stage("step_back").reason == "quota-store-unavailable"
                assert "step_back skipped: quota-store-unavailable" in manifest.degraded
            assert manifest.stage("assemble").status == "done"

        disposable_redis_server.thaw()
        time.sleep(breaker.snapshot().retry_in_s + 0.05)
        manifest, _ = _turn(graph, broad(99))
        assert manifest.stage("step_back").status == "done"
        assert breaker.snapshot().state == "closed"
    finally:
        disposable_redis_server.thaw()
        quota.close()
        cache.close()
