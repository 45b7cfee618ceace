"""What only the Redis stores promise: key layout and expiry, sharing across processes, and
behaviour when the server is down. Every test talks to a real ``redis-server``."""

from __future__ import annotations

import asyncio
import gc
import logging
import multiprocessing
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
import redis
from fixtures.redis_server import RedisServer, unreachable_url

from ragtiller.errors import ConfigurationError, StoreUnavailableError
from ragtiller.stores import CircuitBreaker, RedisCache, RedisQuotaLedger, SpendResult

pytestmark = pytest.mark.redis

UNAVAILABLE = SpendResult(allowed=False, remaining=0, reason="quota-store-unavailable")


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    """A plain client of the shared server, to look at what the stores wrote."""
    with redis.Redis.from_url(redis_url) as r:
        yield r


def _keys(r: redis.Redis, pattern: str) -> set[str]:
    return {k.decode() for k in r.scan_iter(match=pattern)}


@pytest.mark.parametrize(
    ("timezone", "now", "window_id", "seconds_left"),
    [
        ("UTC", datetime(2026, 1, 1, 23, 0, tzinfo=UTC), "2026-01-01", 3600),
        ("Asia/Kolkata", datetime(2026, 1, 1, 18, 0, tzinfo=UTC), "2026-01-01", 1800),
    ],
)
async def test_quota_counter_key_expires_after_its_window(
    client: redis.Redis,
    redis_url: str,
    redis_prefix: str,
    timezone: str,
    now: datetime,
    window_id: str,
    seconds_left: int,
) -> None:
    ledger = RedisQuotaLedger(
        {"chat_gen": 5}, url=redis_url, prefix=redis_prefix, timezone=timezone, clock=lambda: now
    )
    try:
        assert (await ledger.atry_spend("chat_gen", 2)).allowed
        key = f"{redis_prefix}quota:chat_gen:{window_id}"
        assert _keys(client, f"{redis_prefix}*") == {key}
        assert client.get(key) == b"2"
        assert seconds_left - 1 <= client.ttl(key) <= seconds_left + 60
        await ledger.arefund("chat_gen")
        assert client.get(key) == b"1"
        assert seconds_left - 1 <= client.ttl(key) <= seconds_left + 60
    finally:
        await ledger.aclose()


async def test_every_key_written_is_under_the_prefix(
    disposable_redis_server: RedisServer,
) -> None:
    url, prefix = disposable_redis_server.url, "app:"
    ledger = RedisQuotaLedger({"chat_gen": 5}, url=url, prefix=prefix)
    cache = RedisCache(url=url, prefix=prefix)
    try:
        await ledger.atry_spend("chat_gen")
        await cache.aset("a", 1, ttl_s=60)
        await cache.aget_or_compute("b", _returns(2), ttl_s=60)
        with redis.Redis.from_url(url) as r:
            keys = _keys(r, "*")
            assert r.ttl(f"{prefix}cache:a") > 0
        window = ledger.window().id
        assert keys == {f"{prefix}quota:chat_gen:{window}", f"{prefix}cache:a", f"{prefix}cache:b"}
    finally:
        await ledger.aclose()
        await cache.aclose()


async def test_clear_uses_scan_and_spares_quota_keys_and_other_prefixes(
    disposable_redis_server: RedisServer,
) -> None:
    url = disposable_redis_server.url
    prefix = "a*[b]:"  # glob characters must match themselves, not other prefixes
    cache = RedisCache(url=url, prefix=prefix)
    other = RedisCache(url=url, prefix="aXX[b]:")
    ledger = RedisQuotaLedger({"chat_gen": 5}, url=url, prefix=prefix)
    try:
        with redis.Redis.from_url(url) as r:
            r.mset({f"{prefix}cache:{i}": b"1" for i in range(1234)})
            await other.aset("kept", "yes", ttl_s=60)
            await ledger.atry_spend("chat_gen")
            r.config_resetstat()
            cache.clear()
            stats = r.info("commandstats")
            assert _keys(r, f"{prefix.replace('*', '[*]')}cache:*") == set()
            assert r.dbsize() == 2
        assert "cmdstat_scan" in stats
        assert stats["cmdstat_del"]["calls"] == 3  # 500 + 500 + 234
        assert "cmdstat_keys" not in stats
        assert await other.aget("kept") == "yes"
        assert await ledger.aremaining("chat_gen") == 4
    finally:
        await cache.aclose()
        await other.aclose()
        await ledger.aclose()


def _spend_in_process(url: str, prefix: str, start: Any, results: Any) -> None:
    """Child process: wait for the others, then try 50 spends; report how many were allowed."""
    ledger = RedisQuotaLedger({"chat_gen": 20}, url=url, prefix=prefix)

    async def spend() -> int:
        try:
            return sum([(await ledger.atry_spend("chat_gen")).allowed for _ in range(50)])
        finally:
            await ledger.aclose()

    start.wait(timeout=60)
    results.put(asyncio.run(spend()))


@pytest.mark.slow
def test_four_processes_share_one_budget(redis_url: str, redis_prefix: str) -> None:
    context = multiprocessing.get_context("spawn")
    start = context.Barrier(4)
    results = context.Queue()
    processes = [
        context.Process(target=_spend_in_process, args=(redis_url, redis_prefix, start, results))
        for _ in range(4)
    ]
    for process in processes:
        process.start()
    try:
        allowed = [results.get(timeout=60) for _ in processes]
    finally:
        for process in processes:
            process.join(timeout=30)
        results.close()
        results.join_thread()
    assert [p.exitcode for p in processes] == [0, 0, 0, 0]
    assert sum(allowed) == 20
    ledger = RedisQuotaLedger({"chat_gen": 20}, url=redis_url, prefix=redis_prefix)

    async def left() -> int:
        try:
            return await ledger.aremaining("chat_gen")
        finally:
            await ledger.aclose()

    assert asyncio.run(left()) == 0


async def test_two_caches_share_one_async_computation(redis_url: str, redis_prefix: str) -> None:
    caches = [RedisCache(url=redis_url, prefix=redis_prefix, poll_interval_s=0.01) for _ in "ab"]
    calls: list[int] = []

    async def compute() -> str:
        calls.append(1)
        await asyncio.sleep(0.3)
        return "shared"

    try:
        results = await asyncio.gather(
            *(caches[i % 2].aget_or_compute("k", compute, ttl_s=60) for i in range(20))
        )
    finally:
        for cache in caches:
            await cache.aclose()
    assert len(calls) == 1
    assert sorted(results) == [("shared", False)] + [("shared", True)] * 19


async def test_a_waiter_takes_the_value_another_process_computed(
    client: redis.Redis, redis_url: str, redis_prefix: str
) -> None:
    cache = RedisCache(url=redis_url, prefix=redis_prefix, poll_interval_s=0.01)
    client.set(cache.lock_key("k"), "other-process", px=10_000)
    publish = threading.Timer(0.2, lambda: client.set(cache.key("k"), b'"theirs"', px=60_000))
    publish.start()

    async def compute() -> str:
        raise AssertionError("the other process computes it")

    try:
        result = await cache.aget_or_compute("k", compute, ttl_s=60)
    finally:
        publish.join()
        await cache.aclose()
    assert result == ("theirs", True)


async def test_a_waiter_computes_anyway_after_the_bounded_wait(
    client: redis.Redis, redis_url: str, redis_prefix: str
) -> None:
    cache = RedisCache(url=redis_url, prefix=redis_prefix, lock_wait_s=0.3, poll_interval_s=0.01)
    client.set(cache.lock_key("k"), "other-process", px=10_000)
    began = time.monotonic()
    try:
        result = await cache.aget_or_compute("k", _returns("ours"), ttl_s=60)
    finally:
        await cache.aclose()
    waited = time.monotonic() - began
    assert result == ("ours", False)
    assert 0.3 <= waited < 5
    assert client.get(cache.key("k")) == b'"ours"'
    assert client.get(cache.lock_key("k")) == b"other-process"  # not ours to release


async def test_the_lock_is_released_after_computing(
    client: redis.Redis, redis_url: str, redis_prefix: str
) -> None:
    cache = RedisCache(url=redis_url, prefix=redis_prefix)
    try:
        with pytest.raises(RuntimeError, match="boom"):
            await cache.aget_or_compute("bad", _boom, ttl_s=60)
        await cache.aget_or_compute("good", _returns(1), ttl_s=60)
    finally:
        await cache.aclose()
    assert client.exists(cache.lock_key("bad"), cache.lock_key("good"), cache.key("bad")) == 0


async def _boom() -> int:
    raise RuntimeError("boom")


def _returns(value: Any) -> Callable[[], Awaitable[Any]]:
    """A ``compute`` for ``aget_or_compute`` that returns ``value``."""

    async def compute() -> Any:
        return value

    return compute


async def _assert_degraded(ledger: RedisQuotaLedger, cache: RedisCache) -> None:
    """Quota fails closed, the cache fails open, and nothing raises."""
    assert await ledger.atry_spend("chat_gen") == UNAVAILABLE
    assert await ledger.aremaining("chat_gen") == 0
    await ledger.arefund("chat_gen")
    await cache.aset("k", "v", ttl_s=60)
    assert await cache.aget("k") is None
    assert await cache.aget_or_compute("k", _returns("computed"), ttl_s=60) == ("computed", False)


async def test_a_server_that_dies_mid_test_degrades_then_recovers(
    disposable_redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    url = disposable_redis_server.url
    now = [0.0]
    breaker = CircuitBreaker(reset_after_s=5, clock=lambda: now[0])
    ledger = RedisQuotaLedger({"chat_gen": 5}, url=url, prefix="t:", breaker=breaker)
    cache = RedisCache(url=url, prefix="t:", breaker=breaker)
    try:
        assert await ledger.atry_spend("chat_gen") == SpendResult(True, 4)
        await cache.aset("k", "v", ttl_s=60)
        assert await cache.aget("k") == "v"
        disposable_redis_server.stop()
        with caplog.at_level(logging.WARNING, logger="ragtiller.stores"):
            await _assert_degraded(ledger, cache)
        messages = [r.getMessage() for r in caplog.records if r.name == "ragtiller.stores"]
        assert any("refusing 1 chat_gen (fail closed)" in m for m in messages)
        assert any(m.startswith("cache unavailable; k is a miss") for m in messages)
        assert breaker.snapshot().state == "open"
        disposable_redis_server.start()  # empty again: the server keeps nothing on disk
        assert await ledger.atry_spend("chat_gen") == UNAVAILABLE  # not called: the pause is on
        now[0] += 5
        assert await ledger.atry_spend("chat_gen") == SpendResult(True, 4)
        assert await cache.aget_or_compute("k", _returns("again"), ttl_s=60) == ("again", False)
        assert await cache.aget("k") == "again"
    finally:
        await ledger.aclose()
        await cache.aclose()


async def test_an_unreachable_url_degrades_from_the_start() -> None:
    url = unreachable_url()
    ledger = RedisQuotaLedger({"chat_gen": 5}, url=url)
    cache = RedisCache(url=url)
    began = time.monotonic()
    try:
        with pytest.raises(StoreUnavailableError, match=r"^Redis failed: ConnectionError"):
            cache.clear()
        await _assert_degraded(ledger, cache)
        with pytest.raises(StoreUnavailableError, match=r"^Redis circuit open after 3 "):
            cache.clear()
    finally:
        await ledger.aclose()
        await cache.aclose()
    assert time.monotonic() - began < 5


def test_a_store_needs_a_client_or_a_url() -> None:
    with pytest.raises(ConfigurationError, match=r"^a Redis store needs client=, aclient= or url="):
        RedisQuotaLedger({"chat_gen": 1})
    with pytest.raises(ConfigurationError, match=r"^a Redis store needs client=, aclient= or url="):
        RedisCache()


async def test_given_clients_are_used_and_left_open(redis_url: str, redis_prefix: str) -> None:
    sync_client = redis.Redis.from_url(redis_url)
    async_client = redis.asyncio.Redis.from_url(redis_url)
    try:
        cache = RedisCache(client=sync_client, prefix=redis_prefix)
        aledger = RedisQuotaLedger({"chat_gen": 3}, aclient=async_client, prefix=redis_prefix)
        assert await aledger.atry_spend("chat_gen") == SpendResult(True, 2)
        cache.clear()
        with pytest.raises(ConfigurationError, match="only a sync client; pass aclient= or url="):
            await cache.aget("k")
        await cache.aclose()
        await aledger.aclose()
        assert sync_client.ping()
        assert await async_client.ping()
    finally:
        sync_client.close()
        await async_client.aclose()


def _wait_for_connections(r: redis.Redis, expected: int) -> int:
    """The server's client count once it equals ``expected`` (or after 2 s)."""
    deadline = time.monotonic() + 2
    while (count := len(r.client_list())) != expected and time.monotonic() < deadline:
        time.sleep(0.01)
    return count


def test_each_event_loop_gets_its_own_asyncio_client(
    disposable_redis_server: RedisServer,
) -> None:
    url = disposable_redis_server.url
    ledger = RedisQuotaLedger({"chat_gen": 3}, url=url)

    async def spend_and_close() -> SpendResult:
        try:
            return await ledger.atry_spend("chat_gen")
        finally:
            await ledger.aclose()

    with redis.Redis.from_url(url) as r:
        assert asyncio.run(spend_and_close()) == SpendResult(True, 2)
        assert asyncio.run(spend_and_close()) == SpendResult(True, 1)
        assert _wait_for_connections(r, 1) == 1  # only `r`: each loop's client was closed


def test_a_client_whose_loop_ended_unclosed_is_dropped_with_a_warning(
    disposable_redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    url = disposable_redis_server.url
    ledger = RedisQuotaLedger({"chat_gen": 3}, url=url)

    async def spend_and_close() -> SpendResult:
        try:
            return await ledger.atry_spend("chat_gen")
        finally:
            await ledger.aclose()

    with redis.Redis.from_url(url) as r:
        assert asyncio.run(ledger.atry_spend("chat_gen")) == SpendResult(True, 2)  # no aclose
        assert _wait_for_connections(r, 2) == 2
        with pytest.warns(ResourceWarning), caplog.at_level(logging.WARNING, "ragtiller.stores"):
            assert asyncio.run(spend_and_close()) == SpendResult(True, 1)
            gc.collect()
        assert _wait_for_connections(r, 1) == 1
    assert "asyncio client outlived its event loop; await the store's aclose()" in caplog.text


def test_close_reaches_a_loop_running_in_another_thread(
    disposable_redis_server: RedisServer,
) -> None:
    url = disposable_redis_server.url
    ledger = RedisQuotaLedger({"chat_gen": 3}, url=url)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever)
    thread.start()
    try:
        with redis.Redis.from_url(url) as r:
            spent = asyncio.run_coroutine_threadsafe(ledger.atry_spend("chat_gen"), loop)
            assert spent.result(timeout=10) == SpendResult(True, 2)
            assert _wait_for_connections(r, 2) == 2
            ledger.close()
            assert _wait_for_connections(r, 1) == 1
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()


def test_close_runs_a_stopped_loop_to_close_its_client(
    disposable_redis_server: RedisServer,
) -> None:
    url = disposable_redis_server.url
    ledger = RedisQuotaLedger({"chat_gen": 3}, url=url)
    loop = asyncio.new_event_loop()
    try:
        with redis.Redis.from_url(url) as r:
            assert loop.run_until_complete(ledger.atry_spend("chat_gen")) == SpendResult(True, 2)
            assert _wait_for_connections(r, 2) == 2
            ledger.close()
            assert _wait_for_connections(r, 1) == 1
    finally:
        loop.close()


async def test_a_snapshot_of_several_budgets_is_one_round_trip(
    disposable_redis_server: RedisServer,
) -> None:
    url = disposable_redis_server.url
    ledger = RedisQuotaLedger({"chat_gen": 5, "rerank_calls": 9, "other": 1}, url=url)
    try:
        await ledger.atry_spend("chat_gen", 2)
        await ledger.asnapshot()  # loads the script: later calls run it by its SHA
        with redis.Redis.from_url(url) as r:
            r.config_resetstat()
            snapshot = await ledger.asnapshot(["chat_gen", "rerank_calls", "other"])
            stats = r.info("commandstats")
    finally:
        await ledger.aclose()
    assert snapshot.remaining == {"chat_gen": 3, "rerank_calls": 9, "other": 1}
    assert snapshot.available
    # One script call, which reads the store's clock and then the day's three counters.
    assert {name for name in stats if not name.startswith("cmdstat_config")} == {
        "cmdstat_evalsha",
        "cmdstat_time",
        "cmdstat_get",
    }
    assert (stats["cmdstat_evalsha"]["calls"], stats["cmdstat_get"]["calls"]) == (1, 3)
