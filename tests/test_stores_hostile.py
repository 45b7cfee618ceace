"""Every Redis key ragtiller reads, holding what a person or another tool may have put there.

A real redis-server throughout. Quota counters that are not counts fail closed, never raise and
never grant extra calls; the day is the store's, whatever each replica's clock says; a cache
entry or lock that is not ragtiller's is a miss, or is cut to the lock's life; and a turn over
any such key answers within its deadline, labelled.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import redis
from fixtures.fakes import StaticTier, SyncChatModel, hit
from langchain_core.embeddings import DeterministicFakeEmbedding

from ragtiller import build_graph, load_policy
from ragtiller.nodes.step_back import step_back_key
from ragtiller.policies.schema import DeadlinesConfig, RetrievalPolicy, RouterConfig
from ragtiller.routing.llm import router_key
from ragtiller.stores import QuotaSnapshot, RedisCache, RedisQuotaLedger, SpendResult
from ragtiller.stores import _quota as quota_module
from ragtiller.stores._cache import MAX_ENTRY_BYTES

pytestmark = pytest.mark.redis

UNAVAILABLE = SpendResult(allowed=False, remaining=0, reason="quota-store-unavailable")
NOT_COUNTS = ["abc", "5.5", "-3", "", "+4", "1e3", " 2", "٣"]
"""Counter values that are not a count of units (the last is an Arabic-Indic digit three)."""
WRONG_TYPES: dict[str, Callable[[redis.Redis, str], Any]] = {
    "hash": lambda r, key: r.hset(key, "n", 1),
    "list": lambda r, key: r.rpush(key, 1),
    "set": lambda r, key: r.sadd(key, 1),
}


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    with redis.Redis.from_url(redis_url) as r:
        yield r


def store_days(client: redis.Redis) -> list[str]:
    """Yesterday, today and tomorrow (UTC) by the store's clock: a seeded counter is read
    whichever of them the store is in when the test runs."""
    seconds, _ = client.time()
    today = datetime.fromtimestamp(seconds, UTC).date()
    return [(today + timedelta(days=k)).isoformat() for k in (-1, 0, 1)]


def seed_counters(client: redis.Redis, prefix: str, resource: str, value: str) -> None:
    for day in store_days(client):
        client.set(f"{prefix}quota:{resource}:{day}", value)


# --- the ledger ----------------------------------------------------------------------------------


@pytest.mark.parametrize("value", NOT_COUNTS)
async def test_a_counter_that_is_not_a_count_fails_closed_and_never_raises(
    client: redis.Redis, redis_url: str, redis_prefix: str, value: str, caplog: Any
) -> None:
    seed_counters(client, redis_prefix, "chat_gen", value)
    ledger = RedisQuotaLedger(
        {"chat_gen": 10, "rerank_calls": 10}, url=redis_url, prefix=redis_prefix
    )
    try:
        with caplog.at_level(logging.WARNING, logger="ragtiller.stores"):
            assert await ledger.atry_spend("chat_gen") == UNAVAILABLE
            assert await ledger.aremaining("chat_gen") == 0
            unread = QuotaSnapshot({"chat_gen": 0, "rerank_calls": 0}, available=False)
            assert await ledger.asnapshot() == unread
            await ledger.arefund("chat_gen")
        assert "does not hold a count of units" in caplog.text
        assert f"{redis_prefix}quota:chat_gen:" in caplog.text  # names the key to fix
        assert (await ledger.atry_spend("rerank_calls")).allowed  # another counter is fine
    finally:
        await ledger.aclose()
    assert {client.get(f"{redis_prefix}quota:chat_gen:{d}") for d in store_days(client)} == {
        value.encode()
    }  # left as it was, for the operator to see


@pytest.mark.parametrize("kind", WRONG_TYPES)
async def test_a_counter_of_another_redis_type_fails_closed(
    client: redis.Redis, redis_url: str, redis_prefix: str, kind: str
) -> None:
    for day in store_days(client):
        WRONG_TYPES[kind](client, f"{redis_prefix}quota:chat_gen:{day}")
    ledger = RedisQuotaLedger({"chat_gen": 10}, url=redis_url, prefix=redis_prefix)
    try:
        assert await ledger.atry_spend("chat_gen") == UNAVAILABLE
        assert (await ledger.asnapshot()).available is False
    finally:
        await ledger.aclose()


async def test_a_huge_counter_is_a_spent_budget(
    client: redis.Redis, redis_url: str, redis_prefix: str
) -> None:
    seed_counters(client, redis_prefix, "chat_gen", "9" * 40)
    ledger = RedisQuotaLedger({"chat_gen": 10}, url=redis_url, prefix=redis_prefix)
    try:
        assert await ledger.atry_spend("chat_gen") == SpendResult(False, 0, "quota")
        assert await ledger.asnapshot() == QuotaSnapshot({"chat_gen": 0}, available=True)
        await ledger.arefund("chat_gen")  # a refund never passes a count Redis cannot decrement
    finally:
        await ledger.aclose()


async def test_a_negative_counter_grants_no_extra_call(
    client: redis.Redis, redis_url: str, redis_prefix: str
) -> None:
    seed_counters(client, redis_prefix, "chat_gen", "-100")
    ledger = RedisQuotaLedger({"chat_gen": 2}, url=redis_url, prefix=redis_prefix)
    try:
        results = [await ledger.atry_spend("chat_gen") for _ in range(5)]
    finally:
        await ledger.aclose()
    assert results == [UNAVAILABLE] * 5


async def test_replicas_whose_clocks_disagree_by_a_day_spend_one_budget(
    client: redis.Redis,
    redis_url: str,
    redis_prefix: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The probe: two replicas 90 s apart around midnight granted 20 calls on a limit
    # of 10, each counting in its own day. Here they are a whole day apart (+12 h and -12 h:
    # always different dates by their own clocks), and count in the store's day all the same.
    def replica(skew: timedelta) -> RedisQuotaLedger:
        monkeypatch.setattr(quota_module, "_utc_now", lambda: datetime.now(UTC) + skew)
        return RedisQuotaLedger({"chat_gen": 10}, url=redis_url, prefix=redis_prefix)

    ahead, behind = replica(timedelta(hours=12)), replica(timedelta(hours=-12))
    assert ahead.window().id != behind.window().id  # their own clocks disagree on the day
    try:
        granted = [(await ahead.atry_spend("chat_gen")).allowed for _ in range(10)]
        granted += [(await behind.atry_spend("chat_gen")).allowed for _ in range(10)]
        left = (await ahead.aremaining("chat_gen"), await behind.aremaining("chat_gen"))
    finally:
        await ahead.aclose()
        await behind.aclose()
    assert granted.count(True) == 10 and left == (0, 0)
    days = [key.decode().rsplit(":", 1)[1] for key in client.scan_iter(f"{redis_prefix}quota:*")]
    assert days == [store_days(client)[1]]  # one counter: the store's own today


async def test_a_replica_more_than_a_day_off_the_store_fails_closed(
    redis_url: str, redis_prefix: str, monkeypatch: pytest.MonkeyPatch, caplog: Any
) -> None:
    monkeypatch.setattr(quota_module, "_utc_now", lambda: datetime.now(UTC) + timedelta(days=3))
    ledger = RedisQuotaLedger({"chat_gen": 10}, url=redis_url, prefix=redis_prefix)
    try:
        with caplog.at_level(logging.WARNING, logger="ragtiller.stores"):
            assert await ledger.atry_spend("chat_gen") == UNAVAILABLE
            assert (await ledger.asnapshot()).available is False
    finally:
        await ledger.aclose()
    assert "more than a day from this replica's" in caplog.text


# --- the cache -----------------------------------------------------------------------------


def entry_values() -> dict[str, Callable[[redis.Redis, str], Any]]:
    return {
        "not JSON": lambda r, key: r.set(key, "{not json"),
        "JSON of another shape": lambda r, key: r.set(key, '{"route": 7}'),
        "a number": lambda r, key: r.set(key, "42"),
        "too long": lambda r, key: r.set(key, '"' + "x" * (2 * MAX_ENTRY_BYTES) + '"'),
        **WRONG_TYPES,
    }


@pytest.mark.parametrize("kind", entry_values())
async def test_an_entry_that_is_not_ragtillers_is_a_miss_and_is_replaced(
    client: redis.Redis, redis_url: str, redis_prefix: str, kind: str
) -> None:
    cache = RedisCache(url=redis_url, prefix=redis_prefix)
    entry_values()[kind](client, cache.key("k"))

    async def compute() -> dict[str, str]:
        return {"route": "synthesis"}

    try:
        got = await cache.aget_or_compute(
            "k",
            compute,
            ttl_s=60,
            accept=lambda v: isinstance(v, dict) and v.get("route") == "synthesis",
        )
        assert got == ({"route": "synthesis"}, False)
        assert await cache.aget("k") == {"route": "synthesis"}  # replaced
    finally:
        await cache.aclose()


@pytest.mark.parametrize("kind", ["no expiry", "a year", *WRONG_TYPES])
async def test_a_lock_that_would_outlive_its_life_is_cut_to_it(
    client: redis.Redis, redis_url: str, redis_prefix: str, kind: str
) -> None:
    cache = RedisCache(url=redis_url, prefix=redis_prefix, lock_ttl_s=2.0, lock_wait_s=0.2)
    lock = cache.lock_key("k")
    if kind in WRONG_TYPES:
        WRONG_TYPES[kind](client, lock)
    else:
        client.set(lock, "a dead replica", px=None if kind == "no expiry" else 365 * 86_400_000)

    async def compute() -> str:
        return "computed"

    try:
        started = time.perf_counter()
        assert await cache.aget_or_compute("k", compute, ttl_s=60) == ("computed", False)
        assert time.perf_counter() - started < 0.2 + 0.3  # lock_wait_s, then computed anyway
    finally:
        await cache.aclose()
    assert 0 < client.pttl(lock) <= 2000


# --- whole turns ---------------------------------------------------------------------------

BROAD = "how do I get started with asyncio?"
STAGE_S = 0.6
TURN_S = 2.0
SLACK_S = 0.5


def policy() -> RetrievalPolicy:
    base = load_policy()
    deadlines = DeadlinesConfig(
        embed_s=STAGE_S, tier_s=STAGE_S, rerank_s=STAGE_S, chat_s=STAGE_S, turn_s=TURN_S
    )
    router = RouterConfig(llm_router="on")
    return base.model_copy(update={"deadlines": deadlines, "router": router})


def turn(
    redis_url: str, prefix: str, model: SyncChatModel, **cache: Any
) -> tuple[dict[str, Any], float]:
    quota = RedisQuotaLedger({"chat_gen": 10, "rerank_calls": 10}, url=redis_url, prefix=prefix)
    store = RedisCache(url=redis_url, prefix=prefix, **cache)
    graph = build_graph(
        policy(),
        require_tenant=False,
        embedder=DeterministicFakeEmbedding(size=16),
        tiers=[
            StaticTier("dense", [hit("dense", "d0", 1.0)]),
            StaticTier("lexical", [hit("lexical", "l0", 3.0)], needs_vector=False),
        ],
        chat_model=model,
        quota=quota,
        cache=store,
    )

    async def run() -> tuple[dict[str, Any], float]:
        started = time.perf_counter()
        try:
            return await graph.ainvoke({"query": BROAD}), time.perf_counter() - started
        finally:
            await quota.aclose()
            await store.aclose()

    return asyncio.run(run())


def cache_entries(prefix: str) -> dict[str, str]:
    """The cache entries (and, with ``-lock``, the locks) a broad turn reads."""
    router = router_key("SyncChatModel", BROAD)
    step_back = step_back_key(BROAD)
    return {
        "step-back entry": f"{prefix}cache:{step_back}",
        "router entry": f"{prefix}cache:{router}",
        "step-back lock": f"{prefix}cache-lock:{step_back}",
        "router lock": f"{prefix}cache-lock:{router}",
    }


FAIL_CLOSED = "quota-store-unavailable: no paid call this turn (quotas fail closed)"


@pytest.mark.parametrize("resource", ["chat_gen", "rerank_calls"])
@pytest.mark.parametrize("value", ["abc", "5.5", "-3", "hash"])
def test_a_turn_over_a_counter_that_is_not_a_count_fails_closed_in_time(
    client: redis.Redis, redis_url: str, redis_prefix: str, resource: str, value: str
) -> None:
    if value == "hash":
        for day in store_days(client):
            client.hset(f"{redis_prefix}quota:{resource}:{day}", "n", 1)
    else:
        seed_counters(client, redis_prefix, resource, value)
    model = SyncChatModel()
    out, elapsed = turn(redis_url, redis_prefix, model)
    manifest = out["manifest"]
    assert elapsed < TURN_S + SLACK_S
    assert FAIL_CLOSED in manifest.degraded and FAIL_CLOSED in out["context"]
    assert "step_back skipped: quota-store-unavailable" in manifest.degraded
    assert "step-back" not in model.calls
    if resource == "chat_gen":  # the router spends that budget too, before the gate reads it
        assert "llm router skipped: quota-store-unavailable" in manifest.degraded
        assert manifest.llm_calls == 0 and model.calls == []
    assert out["documents"]


def test_a_turn_over_a_huge_counter_is_a_spent_budget(
    client: redis.Redis, redis_url: str, redis_prefix: str
) -> None:
    seed_counters(client, redis_prefix, "chat_gen", "9" * 40)
    model = SyncChatModel()
    out, elapsed = turn(redis_url, redis_prefix, model)
    assert elapsed < TURN_S + SLACK_S
    assert {"step_back skipped: quota", "llm router skipped: quota"} <= set(
        out["manifest"].degraded
    )
    assert model.calls == [] and out["documents"]


@pytest.mark.parametrize("entry", ["step-back entry", "router entry"])
@pytest.mark.parametrize("kind", entry_values())
def test_a_turn_over_a_cache_entry_that_is_not_ragtillers_asks_the_model_again(
    client: redis.Redis, redis_url: str, redis_prefix: str, entry: str, kind: str
) -> None:
    key = cache_entries(redis_prefix)[entry]
    entry_values()[kind](client, key)
    model = SyncChatModel()
    out, elapsed = turn(redis_url, redis_prefix, model)
    manifest = out["manifest"]
    assert elapsed < TURN_S + SLACK_S
    assert manifest.degraded == [] and out["documents"]
    assert sorted(model.calls) == ["router", "step-back"] and manifest.llm_calls == 2
    assert client.type(key) == b"string" and len(client.get(key) or b"") < 200  # replaced


@pytest.mark.parametrize("lock", ["step-back lock", "router lock"])
@pytest.mark.parametrize("kind", ["no expiry", *WRONG_TYPES])
def test_a_turn_over_a_lock_that_is_not_ragtillers_waits_half_its_stage_at_most(
    client: redis.Redis, redis_url: str, redis_prefix: str, lock: str, kind: str
) -> None:
    key = cache_entries(redis_prefix)[lock]
    if kind in WRONG_TYPES:
        WRONG_TYPES[kind](client, key)
    else:
        client.set(key, "a dead replica")
    model = SyncChatModel()
    out, elapsed = turn(redis_url, redis_prefix, model)
    assert elapsed < TURN_S + SLACK_S
    assert out["manifest"].degraded == [] and out["documents"]
    assert sorted(model.calls) == ["router", "step-back"]
    assert 0 < client.pttl(key) <= 15_000  # cut to the lock's life: the next turn is free


@pytest.mark.parametrize(("model_s", "outcome"), [(0.1, "done"), (0.5, "error")])
def test_a_stale_step_back_lock_costs_half_the_step_back_deadline_at_most(
    client: redis.Redis, redis_url: str, redis_prefix: str, model_s: float, outcome: str
) -> None:
    # The probe: a lock left by a dead replica (10 s wait, not cut) plus a 6 s model
    # gave a 16.1 s turn with 0 documents. Scaled down: step-back has 0.6 s, the default
    # 10 s lock wait; the turn waits 0.3 s for the dead replica, then asks its own model.
    client.set(cache_entries(redis_prefix)["step-back lock"], "a dead replica", px=15_000)
    out, elapsed = turn(redis_url, redis_prefix, SyncChatModel(delay_s=model_s))
    record = next(s for s in out["manifest"].stages if s.step == "step_back")
    assert record.status == outcome, record
    assert record.ms < (STAGE_S + 0.1) * 1000
    assert elapsed < TURN_S and out["documents"]
