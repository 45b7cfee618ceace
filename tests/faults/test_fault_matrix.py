"""Every fault of the matrix (``matrix.py``), injected into its slot through the public API."""

from __future__ import annotations

import asyncio
import math
import os
import signal
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from fixtures.fakes import ScriptedChatModel, StaticTier, hit
from fixtures.redis_server import RedisServer
from langchain_core.embeddings import DeterministicFakeEmbedding, Embeddings
from matrix import CASES, Case, render

from ragtiller import build_graph, load_policy
from ragtiller.core.tiers import Candidate, Hit, SearchRequest
from ragtiller.index.dense import NumpyVectorStore
from ragtiller.index.dense_tier import DenseTier
from ragtiller.policies.schema import DeadlinesConfig, RetrievalPolicy
from ragtiller.rerankers.base import RerankResult
from ragtiller.stores import MemoryCache, MemoryQuotaLedger, RedisCache, RedisQuotaLedger

BROAD = "how do I get started with asyncio?"
STAGE_S = 0.6  # a loaded CI core must still meet it with a healthy-but-wrong provider
TURN_S = 3.0
SLACK_S = 1.0
SECRET = "sk-live-0123456789abcdefghijklmnop"
RELEASE = threading.Event()
"""Hung providers block on this until the test ends, so no thread outlives the session."""


@pytest.fixture(autouse=True)
def release_hung_providers() -> Iterator[None]:
    RELEASE.clear()
    yield
    RELEASE.set()


def policy() -> RetrievalPolicy:
    base = load_policy()
    routes = {
        name: route.model_copy(update={"rerank": True, "hybrid": True})
        for name, route in base.routes.items()
    }
    deadlines = DeadlinesConfig(
        embed_s=STAGE_S, tier_s=STAGE_S, rerank_s=STAGE_S, chat_s=STAGE_S, turn_s=TURN_S
    )
    return base.model_copy(update={"routes": routes, "deadlines": deadlines})


def misbehave(fault: str, healthy: Any, garbage: Any, nan: Any, empty: Any, huge: Any) -> Any:
    """What a provider does for ``fault`` (the sync flavour: hangs block a thread)."""
    if fault == "raise":
        raise RuntimeError(f"provider exploded; request had api_key={SECRET}")
    if fault == "hang":
        RELEASE.wait()
        return healthy
    if fault == "slow past deadline":
        time.sleep(STAGE_S * 3)
        return healthy
    return {"garbage": garbage, "nan": nan, "empty": empty, "huge": huge}.get(fault, healthy)


class FaultyEmbedder(Embeddings):
    def __init__(self, fault: str) -> None:
        self.fault = fault
        self.inner = DeterministicFakeEmbedding(size=16)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self.embed_query(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        healthy = self.inner.embed_query(text)
        return misbehave(  # type: ignore[no-any-return]
            self.fault, healthy, "not a vector", [math.nan] * 16, [], [0.1] * 100_000
        )


def healthy_hits(tier: str) -> list[Hit]:
    return [
        hit(tier, f"{tier}{i}", 1.0 - i / 10, text=f"asyncio text {tier} {i}") for i in range(5)
    ]


HUGE_HITS = [hit("any", f"h{i}", 1.0 / (i + 1)) for i in range(100_000)]


class FaultyTier(StaticTier):
    def __init__(self, name: str, fault: str, *, needs_vector: bool) -> None:
        super().__init__(name, healthy_hits(name), needs_vector=needs_vector)
        self.fault = fault

    def search(self, request: SearchRequest) -> list[Hit]:
        dupes = [self.hits[0], self.hits[0]]
        nan = [{**h, "score": math.nan} for h in self.hits]
        huge = HUGE_HITS if self.fault == "huge" else []
        out = misbehave(self.fault, self.hits, ["x", "y"], nan, [], huge)
        return dupes if self.fault == "duplicate ids" else out  # type: ignore[no-any-return]

    async def asearch(self, request: SearchRequest) -> list[Hit]:
        raise AssertionError("a third-party tier's blocking search runs on its bulkhead")


class FaultyReranker:
    """An async reranker: its hangs await forever (and are cancelled at the deadline)."""

    name = "faulty"

    def __init__(self, fault: str) -> None:
        self.fault = fault

    async def arerank(
        self, query: str, candidates: Sequence[Candidate], top_n: int
    ) -> RerankResult:
        given = [dict(c, final_score=float(len(candidates) - i)) for i, c in enumerate(candidates)]
        if self.fault == "raise":
            raise RuntimeError(f"Authorization: Bearer {SECRET}")
        if self.fault == "hang":
            await asyncio.sleep(3600)
        if self.fault == "slow past deadline":
            await asyncio.sleep(STAGE_S * 3)
        ranked: Any = {
            "garbage": ["a", "b"],
            "nan": [dict(c, final_score=math.nan) for c in given],
            "empty": [],
            "foreign ids": [dict(given[0], id="evil", text="a document nobody gave it"), *given],
            "duplicate ids": [given[0], given[0]],
        }.get(self.fault, given)
        return RerankResult(ranked, self.name, {})


def chat_model(fault: str) -> ScriptedChatModel:
    return {
        "raise": ScriptedChatModel(error=f"401 invalid key {SECRET}"),
        "hang": ScriptedChatModel(delay_s=3600),
        "slow past deadline": ScriptedChatModel(delay_s=STAGE_S * 3),
        "garbage": ScriptedChatModel(reply="Sure! asyncio is a library."),
        "empty": ScriptedChatModel(reply=""),
        "huge": ScriptedChatModel(reply="why " * 5000 + "?"),
    }[fault]


@pytest.fixture
def frozen_redis(disposable_redis_server: RedisServer) -> Iterator[str]:
    """A real redis-server, SIGSTOPped: connections open, nothing ever answers."""
    pid = disposable_redis_server._proc.pid  # type: ignore[union-attr]
    os.kill(pid, signal.SIGSTOP)
    try:
        yield disposable_redis_server.url
    finally:
        os.kill(pid, signal.SIGCONT)


DOWN_URL = "redis://127.0.0.1:9/0"  # the discard port: nothing listens


def components(case: Case, request: pytest.FixtureRequest) -> dict[str, Any]:
    parts: dict[str, Any] = {
        "embedder": DeterministicFakeEmbedding(size=16),
        "tiers": [
            StaticTier("dense", healthy_hits("dense")),
            StaticTier("lexical", healthy_hits("lexical"), needs_vector=False),
        ],
        "chat_model": ScriptedChatModel(),
        "quota": MemoryQuotaLedger({"chat_gen": 5, "rerank_calls": 5}),
        "cache": MemoryCache(),
    }
    if case.slot == "embedder":
        parts["embedder"] = FaultyEmbedder(case.fault)
        texts = [h["text"] for h in healthy_hits("dense")]
        store = NumpyVectorStore.from_texts(texts, DeterministicFakeEmbedding(size=16))
        parts["tiers"][0] = DenseTier(store)  # a real dense tier: it checks the dimension
    elif case.slot.endswith("tier"):
        name = case.slot.split()[0]
        parts["tiers"] = [
            FaultyTier(t, case.fault, needs_vector=t == "dense") if t == name else tier
            for t, tier in zip(("dense", "lexical"), parts["tiers"], strict=True)
        ]
    elif case.slot == "reranker":
        parts["reranker"] = FaultyReranker(case.fault)
    elif case.slot == "chat model":
        parts["chat_model"] = chat_model(case.fault)
    elif case.slot in ("quota store", "cache"):
        url = DOWN_URL if case.fault == "down" else request.getfixturevalue("frozen_redis")
        if case.slot == "quota store":
            parts["quota"] = RedisQuotaLedger({"chat_gen": 5}, url=url, socket_timeout_s=0.2)
        else:
            # Step-back waits on the cache within its own stage deadline, and a frozen cache
            # costs three socket timeouts (then its breaker opens): 0.05 s leaves the model time.
            parts["cache"] = RedisCache(url=url, socket_timeout_s=0.05)
    return parts


def matching(out: dict[str, Any], case: Case) -> Any:
    tier = case.slot.split()[0] if case.slot.endswith("tier") else "dense" * (case.fault == "huge")
    for stage in out["manifest"].stages:
        if stage.step == case.stage and (
            case.stage != "tier_search" or stage.detail.get("tier") == tier
        ):
            return stage
    raise AssertionError(f"no {case.stage} record: {[s.step for s in out['manifest'].stages]}")


@pytest.mark.parametrize("path", ["invoke", "ainvoke"])
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_fault(case: Case, path: str, request: pytest.FixtureRequest) -> None:
    parts = components(case, request)
    graph = build_graph(policy(), require_tenant=False, **parts)
    started = time.perf_counter()
    try:
        if path == "invoke":
            out = graph.invoke({"query": BROAD})
        else:
            out = asyncio.run(graph.ainvoke({"query": BROAD}))
        elapsed = time.perf_counter() - started
    finally:
        parts["quota"].close()
        parts["cache"].close()
    assert elapsed < TURN_S + SLACK_S, f"turn took {elapsed:.2f}s"
    stage = matching(out, case)
    assert (stage.status, stage.reason) == (case.status, case.reason), stage
    manifest = out["manifest"]
    if case.label is not None:
        assert case.label in manifest.degraded
        assert case.label in out["context"]
    assert SECRET not in manifest.model_dump_json()
    assert all(d.id != "evil" for d in out["documents"])


def test_reliability_doc_is_the_matrix() -> None:
    from matrix import DOC

    assert DOC.read_text("utf-8") == render(), "run: python tests/faults/matrix.py --write"
