"""Cost control around the Cohere ceiling: cache, budgets, credentials, latency, failures."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from fixtures.cohere_stub import CohereStub, StubMode
from fixtures.fakes import hit

from ragtiller.core.tiers import Candidate
from ragtiller.errors import ConfigurationError, StoreUnavailableError
from ragtiller.policies.schema import RerankerConfig
from ragtiller.ranking.fusion import fuse_hits
from ragtiller.rerankers import (
    BaseReranker,
    CeilingReranker,
    CohereReranker,
    LatencyWindow,
    RerankResult,
    ZScoreReranker,
)
from ragtiller.stores import MemoryCache, MemoryQuotaLedger, QuotaWindow, spend_caps
from ragtiller.stores._quota import Counter

KEY = "stub-key-0123456789"
QUERY = "How do I reset a forgotten password?"
TEXTS = {
    "a": "billing and invoices",
    "b": "reset your password from the login page",
    "c": "a forgotten password can be reset by email",
    "d": "password rules",
}
DETAIL_KEYS = {"provider", "ceiling", "ceiling_reason", "from_cache", "cost_usd", "candidates_sent"}


def candidates(texts: dict[str, str] = TEXTS) -> list[Candidate]:
    hits = [
        hit("dense", i, float(len(texts) - n), text=t) for n, (i, t) in enumerate(texts.items())
    ]
    return fuse_hits({"dense": hits}, method="rrf", cap=len(hits))


def ids(result: RerankResult) -> list[str]:
    return [c["id"] for c in result.candidates]


@pytest.fixture
def stub() -> Iterator[CohereStub]:
    with CohereStub(slow_s=5.0) as server:
        yield server


@pytest.fixture
def cohere(stub: CohereStub) -> Iterator[CohereReranker]:
    reranker = CohereReranker(api_key=KEY, base_url=stub.url, timeout_s=0.5, env={})
    yield reranker
    reranker.close()


def ceiling_over(
    cohere: BaseReranker, config: RerankerConfig | None = None, **kwargs: Any
) -> CeilingReranker:
    return CeilingReranker(cohere, ZScoreReranker(), config or RerankerConfig(), **kwargs)


async def test_used_reports_cost_and_every_detail_key(
    stub: CohereStub, cohere: CohereReranker
) -> None:
    result = await ceiling_over(cohere).arerank(QUERY, candidates(), top_n=2)
    assert ids(result) == ["c", "b"]
    assert result.method == "cohere"
    assert result.error is None
    assert result.detail.keys() >= DETAIL_KEYS
    assert result.detail["ceiling"] == "used"
    assert result.detail["ceiling_reason"] is None
    assert result.detail["from_cache"] is False
    assert result.detail["cost_usd"] == 0.002
    assert result.detail["candidates_sent"] == 4
    assert stub.rerank_bodies[0]["query"] == QUERY
    assert stub.rerank_bodies[0]["top_n"] == 4  # the whole ranking is asked for, then cached


async def test_cache_hit_costs_nothing_and_sends_nothing(
    stub: CohereStub, cohere: CohereReranker
) -> None:
    ledger = MemoryQuotaLedger({"rerank_calls": 10})
    reranker = ceiling_over(cohere, ledger=ledger, cache=MemoryCache())
    first = await reranker.arerank(QUERY, candidates(), top_n=3)
    shuffled = list(reversed(candidates()))  # same ids, another order: same key
    second = await reranker.arerank(QUERY, shuffled, top_n=2)

    assert len(stub.requests) == 1
    assert await ledger.aremaining("rerank_calls") == 9
    assert second.detail["from_cache"] is True
    assert second.detail["ceiling"] == "used"
    assert second.detail["cost_usd"] == 0.0
    assert second.detail["candidates_sent"] == 0
    assert ids(second) == ids(first)[:2]
    assert [c["final_score"] for c in second.candidates] == [
        c["final_score"] for c in first.candidates[:2]
    ]


async def test_concurrent_identical_calls_share_one_request(
    stub: CohereStub, cohere: CohereReranker
) -> None:
    reranker = ceiling_over(cohere)
    results = await asyncio.gather(
        *(reranker.arerank(QUERY, candidates(), top_n=2) for _ in range(3))
    )
    assert len(stub.requests) == 1
    assert sorted(r.detail["from_cache"] for r in results) == [False, True, True]
    assert all(ids(r) == ["c", "b"] for r in results)


async def test_another_candidate_set_is_a_cache_miss(
    stub: CohereStub, cohere: CohereReranker
) -> None:
    reranker = ceiling_over(cohere)
    await reranker.arerank(QUERY, candidates(), top_n=2)
    await reranker.arerank(QUERY, candidates()[:3], top_n=2)
    await reranker.arerank("password rules", candidates(), top_n=2)
    assert len(stub.requests) == 3


async def test_daily_budget_exhausted_uses_the_floor(
    stub: CohereStub, cohere: CohereReranker
) -> None:
    reranker = ceiling_over(cohere, ledger=MemoryQuotaLedger({"rerank_calls": 2}))
    for query in ("reset password", "forgotten password"):
        assert (await reranker.arerank(query, candidates(), top_n=2)).method == "cohere"
    result = await reranker.arerank("password rules", candidates(), top_n=2)

    assert len(stub.requests) == 2
    assert result.method == "zscore"
    assert result.error is None
    assert result.detail["ceiling"] == "skipped"
    assert result.detail["ceiling_reason"] == "budget"
    assert result.detail["calls_remaining"] == 0
    assert ids(result) == ["a", "b"]


async def test_no_credentials_spends_nothing(stub: CohereStub) -> None:
    ledger = MemoryQuotaLedger({"rerank_calls": 5})
    reranker = ceiling_over(CohereReranker(base_url=stub.url, env={}), ledger=ledger)
    result = await reranker.arerank(QUERY, candidates(), top_n=2)
    assert result.detail["ceiling"] == "skipped"
    assert result.detail["ceiling_reason"] == "no-credentials"
    assert result.error is None
    assert await ledger.aremaining("rerank_calls") == 5
    assert stub.requests == []


class DownLedger(MemoryQuotaLedger):
    """A ledger whose store is unreachable."""

    async def _achange(
        self, counters: Sequence[tuple[Counter, int]], n: int, window: QuotaWindow
    ) -> tuple[bool, list[int]]:
        if n > 0:
            raise StoreUnavailableError("redis is down")
        return await super()._achange(counters, n, window)


async def test_quota_store_down_fails_closed(stub: CohereStub, cohere: CohereReranker) -> None:
    reranker = ceiling_over(cohere, ledger=DownLedger({"rerank_calls": 5}))
    result = await reranker.arerank(QUERY, candidates(), top_n=2)
    assert result.detail["ceiling_reason"] == "quota-store-unavailable"
    assert stub.requests == []


@pytest.mark.parametrize(
    ("mode", "kind", "refunded"),
    [
        ("429", "rate-limited", True),
        ("500", "server-error", True),
        ("slow", "timeout", False),
        ("malformed", "malformed-response", False),
    ],
)
async def test_ceiling_errors_use_the_floor_and_are_not_cached(
    stub: CohereStub, cohere: CohereReranker, mode: StubMode, kind: str, refunded: bool
) -> None:
    stub.mode = mode
    ledger = MemoryQuotaLedger({"rerank_calls": 5})
    reranker = ceiling_over(cohere, ledger=ledger)

    result = await reranker.arerank(QUERY, candidates(), top_n=3)

    assert result.method == "zscore"
    assert result.error is not None
    assert KEY not in result.error
    assert ids(result) == ["a", "b", "c"]
    assert result.detail["ceiling"] == "error"
    assert result.detail["ceiling_reason"] == kind
    assert result.detail["from_cache"] is False
    assert result.detail["cost_usd"] == 0.0
    assert result.detail["candidates_sent"] == 4
    assert await ledger.aremaining("rerank_calls") == (5 if refunded else 4)

    stub.mode = "ok"
    again = await reranker.arerank(QUERY, candidates(), top_n=3)
    assert again.method == "cohere" and again.detail["from_cache"] is False
    assert len(stub.requests) == 2


async def test_more_than_max_candidates_are_capped(
    stub: CohereStub, cohere: CohereReranker
) -> None:
    many = candidates({f"c{i:03d}": f"document {i} about password" for i in range(150)})
    result = await ceiling_over(cohere).arerank("password", many, top_n=12)
    [body] = stub.rerank_bodies
    assert len(body["documents"]) == 100
    assert result.detail["candidates_sent"] == 100
    assert len(result.candidates) == 12


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_slow_ceiling_trips_the_p95_rule_until_samples_age_out(
    stub: CohereStub, cohere: CohereReranker
) -> None:
    clock = Clock()
    window = LatencyWindow(size=20, max_age_s=60, min_samples=2, clock=clock)
    config = RerankerConfig(max_p95_latency_ms_added=40)
    reranker = ceiling_over(cohere, config, latency=window)
    stub.mode, stub.slow_s = "slow", 0.08  # answers after 80 ms: slow, within the timeout

    for query in ("one", "two"):
        assert (await reranker.arerank(query, candidates(), top_n=2)).method == "cohere"
    tripped = await reranker.arerank("three", candidates(), top_n=2)

    assert len(stub.requests) == 2
    assert tripped.method == "zscore"
    assert tripped.error is None
    assert tripped.detail["ceiling"] == "skipped"
    assert tripped.detail["ceiling_reason"] == "latency"
    assert tripped.detail["latency_p95_ms"] >= 80
    assert tripped.detail["max_p95_latency_ms_added"] == 40

    cached = await reranker.arerank("one", candidates(), top_n=2)  # a hit is free and fast
    assert cached.detail["from_cache"] is True

    clock.now += 61  # the slow samples age out: the ceiling is tried again
    stub.mode = "ok"
    retried = await reranker.arerank("four", candidates(), top_n=2)
    assert retried.detail["ceiling"] == "used"
    assert "latency_p95_ms" not in retried.detail  # one fresh sample, below min_samples
    assert len(stub.requests) == 3


def test_latency_window_nearest_rank_p95() -> None:
    window = LatencyWindow(size=20, min_samples=1)
    for ms in range(1, 41):  # only the last 20 (21..40) are kept
        window.add(float(ms))
    assert window.p95() == 39.0  # ceil(0.95 * 20) = 19th of 21..40
    assert LatencyWindow(min_samples=3).p95() is None


class RaisingCeiling(BaseReranker):
    """A third-party ceiling that breaks the never-raise contract."""

    name = "rogue"

    async def arerank(
        self, query: str, candidates: Sequence[Candidate], top_n: int
    ) -> RerankResult:
        raise RuntimeError("boom")


async def test_a_raising_ceiling_still_yields_the_floor() -> None:
    result = await ceiling_over(RaisingCeiling()).arerank(QUERY, candidates(), top_n=2)
    assert result.method == "zscore"
    assert result.error == "RuntimeError: boom"
    assert result.detail["ceiling"] == "error"
    assert result.detail["provider"] == "rogue"


async def test_disabled_ceiling_reports_its_reason(
    stub: CohereStub, cohere: CohereReranker
) -> None:
    reranker = ceiling_over(cohere, disabled_reason="no-eval-lift", disabled_note="why")
    result = await reranker.arerank(QUERY, candidates(), top_n=2)
    assert result.detail["ceiling_reason"] == "no-eval-lift"
    assert result.detail["ceiling_note"] == "why"
    assert result.detail.keys() >= DETAIL_KEYS
    assert stub.requests == []


async def test_no_candidates_skips_the_ceiling(stub: CohereStub, cohere: CohereReranker) -> None:
    result = await ceiling_over(cohere).arerank(QUERY, [], top_n=2)
    assert result.candidates == []
    assert result.detail["ceiling_reason"] == "no-candidates"
    assert stub.requests == []


def test_ledger_without_rerank_calls_is_refused(cohere: CohereReranker) -> None:
    with pytest.raises(ConfigurationError, match="the quota ledger has no 'rerank_calls' limit"):
        ceiling_over(cohere, ledger=MemoryQuotaLedger({"chat_gen": 20}))


class CountingFloor(ZScoreReranker):
    """The z-score floor, counting how often it runs."""

    def __init__(self) -> None:
        super().__init__()
        self.runs = 0

    async def arerank(
        self, query: str, candidates: Sequence[Candidate], top_n: int
    ) -> RerankResult:
        self.runs += 1
        return await super().arerank(query, candidates, top_n)


@pytest.mark.parametrize("mode", ["500", "malformed"])
async def test_a_failing_cohere_ceiling_runs_the_floor_once(mode: StubMode) -> None:
    floor = CountingFloor()
    with CohereStub(mode) as server:
        cohere = CohereReranker(api_key=KEY, base_url=server.url, env={}, floor=floor)
        config = RerankerConfig(ceiling="cohere", require_eval_lift=False)
        ledger = MemoryQuotaLedger({"rerank_calls": 5})
        try:
            result = await CeilingReranker(cohere, floor, config, ledger).arerank(
                "reset password", candidates(), top_n=2
            )
        finally:
            cohere.close()
    assert result.method == "zscore"
    assert result.detail["ceiling"] == "error"
    assert floor.runs == 1


async def test_a_turn_policys_lower_daily_limit_caps_the_ceilings_spend(
    stub: CohereStub, cohere: CohereReranker
) -> None:
    """The graph runs each node under its turn policy's daily limits (``spend_caps``): a run
    policy with ``reranker.daily_calls: 1`` gets one paid call, though the ledger allows 10."""
    ledger = MemoryQuotaLedger({"rerank_calls": 10})
    reranker = ceiling_over(cohere, ledger=ledger)
    with spend_caps({"rerank_calls": 1}):
        results = await asyncio.gather(
            *(reranker.arerank(f"{QUERY} {i}", candidates(), top_n=2) for i in range(4))
        )
    assert sorted(str(r.detail["ceiling"]) for r in results).count("used") == 1
    assert len(stub.requests) == 1
    assert await ledger.aremaining("rerank_calls") == 9
