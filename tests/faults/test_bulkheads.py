"""A hung provider exhausts only its own pool: other graphs in the process keep answering."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator

import pytest
from fixtures.fakes import StaticTier, hit
from langchain_core.embeddings import DeterministicFakeEmbedding, Embeddings

from ragtiller import build_graph, load_policy
from ragtiller.core.bulkhead import Bulkhead, DeadlineExceeded, Overloaded, within
from ragtiller.policies.schema import DeadlinesConfig

RELEASE = threading.Event()


@pytest.fixture(autouse=True)
def release() -> Iterator[None]:
    RELEASE.clear()
    yield
    RELEASE.set()


class HungEmbedder(Embeddings):
    """Blocks in every call until the test ends."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        RELEASE.wait()
        return [[0.0] * 16 for _ in texts]

    def embed_query(self, text: str) -> list[float]:
        RELEASE.wait()
        return [0.0] * 16


class ThreadedEmbedder(Embeddings):
    """Shaped like the bundled MiniLM embedder: its async calls go through a worker thread."""

    def __init__(self) -> None:
        self.inner = DeterministicFakeEmbedding(size=16)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        return self.inner.embed_query(text)

    async def aembed_query(self, text: str) -> list[float]:
        return await asyncio.to_thread(self.embed_query, text)


def tiers() -> list[StaticTier]:
    return [
        StaticTier("dense", [hit("dense", f"d{i}", 1 - i / 10) for i in range(3)]),
        StaticTier("lexical", [hit("lexical", "l0", 3.0)], needs_vector=False),
    ]


@pytest.mark.parametrize("healthy", [DeterministicFakeEmbedding(size=16), ThreadedEmbedder()])
def test_twenty_hung_turns_leave_another_graph_answering(healthy: Embeddings) -> None:
    slow = DeadlinesConfig(embed_s=60, tier_s=60, rerank_s=60, chat_s=60, turn_s=120)
    hung = build_graph(
        load_policy().model_copy(update={"deadlines": slow}),
        require_tenant=False,
        embedder=HungEmbedder(),
        tiers=tiers(),
    )
    in_flight = [
        threading.Thread(
            target=hung.invoke, args=({"query": "which port does it use"},), daemon=True
        )
        for _ in range(20)
    ]
    for thread in in_flight:
        thread.start()
    time.sleep(0.5)
    assert all(t.is_alive() for t in in_flight), "the hung turns must still be in flight"

    other = build_graph(require_tenant=False, embedder=healthy, tiers=tiers())
    started = time.perf_counter()
    out = other.invoke({"query": "which port does it use"})
    sync_s = time.perf_counter() - started
    started = time.perf_counter()
    aout = asyncio.run(other.ainvoke({"query": "which port does it use"}))
    async_s = time.perf_counter() - started
    assert sync_s < 2.0 and async_s < 2.0, (sync_s, async_s)
    assert out["manifest"].stage("embed").status == "done"
    assert aout["manifest"].stage("embed").status == "done"


def test_a_bulkhead_with_a_full_bounded_queue_refuses_at_once() -> None:
    pool = Bulkhead("test", workers=1, queue=0)

    async def scenario() -> float:
        first = asyncio.ensure_future(pool.call(RELEASE.wait, timeout_s=5))
        await asyncio.sleep(0.05)
        started = time.perf_counter()
        with pytest.raises(Overloaded):
            await pool.call(sum, [1], timeout_s=5)
        RELEASE.set()
        await first
        return time.perf_counter() - started

    assert asyncio.run(scenario()) < 0.5


def test_a_call_queued_past_its_deadline_never_runs() -> None:
    pool = Bulkhead("test", workers=1, queue=4)
    ran: list[int] = []

    async def scenario() -> None:
        blocker = asyncio.ensure_future(pool.call(RELEASE.wait, timeout_s=5))
        await asyncio.sleep(0.05)
        with pytest.raises(Overloaded):
            await pool.call(ran.append, 1, timeout_s=0.1)
        RELEASE.set()
        await blocker
        await pool.call(ran.append, 2, timeout_s=1)

    asyncio.run(scenario())
    assert ran == [2]


def test_a_providers_own_timeout_is_not_our_deadline() -> None:
    async def provider_times_out() -> None:
        raise TimeoutError("provider's HTTP read timed out")

    async def hangs() -> None:
        await asyncio.sleep(3600)

    with pytest.raises(TimeoutError) as raised:
        asyncio.run(within(provider_times_out(), 5))
    assert not isinstance(raised.value, DeadlineExceeded)
    with pytest.raises(DeadlineExceeded):
        asyncio.run(within(hangs(), 0.05))
