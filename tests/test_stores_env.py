"""Choosing the store backends from the environment."""

from __future__ import annotations

import socket
import sys

import pytest

from ragtiller.stores import (
    MemoryCache,
    MemoryQuotaLedger,
    QuotaSnapshot,
    RedisCache,
    RedisQuotaLedger,
    SpendResult,
    stores_from_env,
)


@pytest.mark.parametrize("value", [None, "", "   "])
def test_without_redis_url_the_stores_live_in_memory(
    monkeypatch: pytest.MonkeyPatch, value: str | None
) -> None:
    if value is None:
        monkeypatch.delenv("REDIS_URL", raising=False)
    else:
        monkeypatch.setenv("REDIS_URL", value)
    ledger, cache = stores_from_env({"chat_gen": 2}, timezone="Europe/Paris")
    assert isinstance(ledger, MemoryQuotaLedger)
    assert isinstance(cache, MemoryCache)
    assert ledger.timezone == "Europe/Paris"
    assert ledger.limit("chat_gen") == 2


@pytest.mark.redis
async def test_with_redis_url_the_stores_live_in_redis(
    monkeypatch: pytest.MonkeyPatch, redis_url: str, redis_prefix: str
) -> None:
    monkeypatch.setenv("REDIS_URL", redis_url)
    ledger, cache = stores_from_env({"chat_gen": 2}, prefix=redis_prefix)
    replica_ledger, replica_cache = stores_from_env({"chat_gen": 2}, prefix=redis_prefix)
    try:
        assert isinstance(ledger, RedisQuotaLedger)
        assert isinstance(cache, RedisCache)
        assert await ledger.atry_spend("chat_gen") == SpendResult(True, 1)
        assert await replica_ledger.atry_spend("chat_gen") == SpendResult(True, 0)
        await cache.aset("k", "shared", ttl_s=60)
        assert await replica_cache.aget("k") == "shared"
        assert cache.key("k") == f"{redis_prefix}cache:k"
        assert ledger.breaker is cache.breaker  # one Redis, one breaker
        assert replica_ledger.breaker is not ledger.breaker
    finally:
        for store in (ledger, cache, replica_ledger, replica_cache):
            await store.aclose()


def test_redis_url_without_the_redis_package_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:1/0")
    monkeypatch.setitem(sys.modules, "redis", None)  # makes `import redis` fail
    with pytest.raises(ImportError, match=r"pip install 'ragtiller\[redis\]'"):
        stores_from_env({"chat_gen": 2})


async def test_the_ledger_and_cache_of_one_dead_redis_share_one_breaker(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("REDIS_URL", f"redis://127.0.0.1:{port}/0")
    ledger, cache = stores_from_env({"chat_gen": 2})
    assert isinstance(ledger, RedisQuotaLedger) and isinstance(cache, RedisCache)
    try:
        for _ in range(3):
            assert await cache.aget("k") is None  # connection refused, three times
        assert not ledger.available  # the cache's failures opened the ledger's breaker too
        assert await ledger.asnapshot() == QuotaSnapshot({"chat_gen": 0}, available=False)
        assert (await ledger.atry_spend("chat_gen")).reason == "quota-store-unavailable"
    finally:
        await ledger.aclose()
        await cache.aclose()
