"""The circuit breaker in front of Redis: alone with a fake clock, then with a real server frozen
by SIGSTOP, where the first calls cost one timeout each and the next ones about nothing."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

import pytest
from fixtures.redis_server import RedisServer

from ragtiller.errors import ConfigurationError
from ragtiller.stores import (
    BreakerSnapshot,
    CircuitBreaker,
    QuotaSnapshot,
    RedisCache,
    RedisQuotaLedger,
    SpendResult,
)

UNAVAILABLE = SpendResult(allowed=False, remaining=0, reason="quota-store-unavailable")


class Clock:
    """A monotonic clock that moves only when told."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _breaker(clock: Clock, threshold: int = 3) -> CircuitBreaker:
    return CircuitBreaker(failure_threshold=threshold, reset_after_s=5, clock=clock)


def _fail(breaker: CircuitBreaker, times: int) -> None:
    for _ in range(times):
        assert breaker.admit()
        breaker.failed()


def test_it_opens_after_n_consecutive_failures_only() -> None:
    clock = Clock()
    breaker = _breaker(clock)
    _fail(breaker, 2)
    assert breaker.admit()
    breaker.succeeded()  # a success in between: the count starts again
    _fail(breaker, 2)
    assert breaker.snapshot() == BreakerSnapshot("closed", 2, 0.0, available=True)
    _fail(breaker, 1)
    assert breaker.snapshot() == BreakerSnapshot("open", 3, 5.0, available=False)
    assert not breaker.available
    assert not breaker.admit()
    clock.now += 4.5
    assert not breaker.admit()
    assert breaker.snapshot().retry_in_s == pytest.approx(0.5)


def test_after_the_pause_one_probe_at_a_time_decides() -> None:
    clock = Clock()
    breaker = _breaker(clock)
    _fail(breaker, 3)
    clock.now += 5
    assert breaker.snapshot() == BreakerSnapshot("half-open", 3, 0.0, available=True)
    assert breaker.admit()  # the probe
    assert breaker.snapshot() == BreakerSnapshot("half-open", 3, 0.0, available=False)
    assert not breaker.admit()  # the others do not wait for it
    breaker.failed()  # the probe failed: another full pause
    assert breaker.snapshot() == BreakerSnapshot("open", 4, 5.0, available=False)
    clock.now += 5
    assert breaker.admit()
    breaker.succeeded()
    assert breaker.snapshot() == BreakerSnapshot("closed", 0, 0.0, available=True)
    assert breaker.admit() and breaker.admit()


def test_an_abandoned_probe_lets_the_next_caller_probe() -> None:
    clock = Clock()
    breaker = _breaker(clock, threshold=1)
    _fail(breaker, 1)
    clock.now += 5
    assert breaker.admit()
    breaker.abandoned()  # cancelled: no verdict on the store
    assert breaker.snapshot().state == "half-open"
    assert breaker.admit()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"failure_threshold": 0}, "failure_threshold must be >= 1, but got 0"),
        ({"failure_threshold": 2.5}, "failure_threshold must be an int, but got 2.5"),
        ({"reset_after_s": 0}, "reset_after_s must be a finite number of seconds > 0"),
        ({"reset_after_s": math.inf}, r"reset_after_s must be .* but got inf"),
        ({"reset_after_s": math.nan}, r"reset_after_s must be .* but got nan"),
    ],
)
def test_bad_settings_are_configuration_errors(kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        CircuitBreaker(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["connect_timeout_s", "socket_timeout_s"])
@pytest.mark.parametrize("value", [0, -1, math.inf, math.nan])
def test_timeouts_must_be_finite_and_positive(name: str, value: float) -> None:
    with pytest.raises(ConfigurationError, match=rf"{name} must be a finite number of seconds"):
        RedisCache(url="redis://127.0.0.1:1/0", **{name: value})  # type: ignore[arg-type]


def test_memory_stores_are_always_available() -> None:
    from ragtiller.stores import MemoryCache, MemoryQuotaLedger

    assert MemoryQuotaLedger({"chat_gen": 1}).available
    assert MemoryCache().available


# --- a real Redis, frozen with SIGSTOP -------------------------------------------------------

TIMEOUT_S = 0.3
"""Connect and socket timeout of the stores under test."""

RESET_S = 1.0
"""How long the breaker stays open."""

SLACK_S = 0.25
"""Scheduling slack on a busy machine; still less than a second timeout would add."""


@dataclass
class Stores:
    server: RedisServer
    breaker: CircuitBreaker
    ledger: RedisQuotaLedger
    cache: RedisCache


@pytest.fixture
async def stores(disposable_redis_server: RedisServer) -> AsyncIterator[Stores]:
    """A ledger and a cache sharing one breaker, on a server of the test's own."""
    url = disposable_redis_server.url
    breaker = CircuitBreaker(failure_threshold=3, reset_after_s=RESET_S)
    timeouts = {"connect_timeout_s": TIMEOUT_S, "socket_timeout_s": TIMEOUT_S}
    ledger = RedisQuotaLedger({"chat_gen": 5}, url=url, breaker=breaker, **timeouts)
    cache = RedisCache(url=url, breaker=breaker, **timeouts)
    yield Stores(disposable_redis_server, breaker, ledger, cache)
    disposable_redis_server.thaw()
    await ledger.aclose()
    await cache.aclose()


async def _atimed(coro: object) -> tuple[object, float]:
    began = time.perf_counter()
    result = await coro  # type: ignore[misc]
    return result, time.perf_counter() - began


def _returns(value: object) -> Callable[[], Awaitable[object]]:
    async def compute() -> object:
        return value

    return compute


@pytest.mark.redis
async def test_a_frozen_redis_costs_one_timeout_per_call_until_the_breaker_opens(
    stores: Stores,
) -> None:
    ledger, cache = stores.ledger, stores.cache
    assert (await ledger.atry_spend("chat_gen")).allowed
    await cache.aset("k", "v", ttl_s=60)
    assert await cache.aget("k") == "v"
    stores.server.freeze()

    first, took = await _atimed(ledger.atry_spend("chat_gen"))
    assert first == UNAVAILABLE
    assert took < TIMEOUT_S + SLACK_S  # one timeout: a timeout is not retried
    second, took = await _atimed(cache.aget("k"))
    assert second is None  # the cache fails open
    assert took < TIMEOUT_S + SLACK_S
    third, took = await _atimed(ledger.asnapshot())
    assert third == QuotaSnapshot({"chat_gen": 0}, available=False)
    assert took < TIMEOUT_S + SLACK_S

    # Open: shared by the ledger and the cache; Redis is not called.
    assert not ledger.available and not cache.available
    assert stores.breaker.snapshot().state == "open"
    durations = []
    for _ in range(20):
        spent, took = await _atimed(ledger.atry_spend("chat_gen"))
        assert spent == UNAVAILABLE
        durations.append(took)
        computed, took = await _atimed(cache.aget_or_compute("k", _returns("fresh"), ttl_s=60))
        assert computed == ("fresh", False)
        durations.append(took)
        reading, took = await _atimed(ledger.asnapshot(["chat_gen"]))
        assert reading.available is False
        durations.append(took)
    assert max(durations) < 0.05


@pytest.mark.redis
async def test_the_half_open_probe_restores_service_after_sigcont(stores: Stores) -> None:
    ledger = stores.ledger
    assert await ledger.atry_spend("chat_gen") == SpendResult(True, 4)
    stores.server.freeze()
    for _ in range(3):
        assert await ledger.atry_spend("chat_gen") == UNAVAILABLE
    assert stores.breaker.snapshot().state == "open"

    stores.server.thaw()
    assert await ledger.atry_spend("chat_gen") == UNAVAILABLE  # still open: Redis is not called yet
    await asyncio.sleep(stores.breaker.snapshot().retry_in_s + 0.05)
    assert ledger.available  # half-open: the next call probes
    reading, took = await _atimed(ledger.asnapshot())
    assert isinstance(reading, QuotaSnapshot) and reading.available
    assert took < SLACK_S
    assert stores.breaker.snapshot() == BreakerSnapshot("closed", 0, 0.0, available=True)
    # The resumed server may still run spends that timed out (they were refused): the ledger
    # errs towards spending less than the budget, never more.
    left = reading.remaining["chat_gen"]
    assert 1 <= left <= 4
    assert await ledger.atry_spend("chat_gen") == SpendResult(True, left - 1)
    assert await stores.cache.aget_or_compute("k", _returns(1), ttl_s=60) == (1, False)
    assert await stores.cache.aget("k") == 1


@pytest.mark.redis
async def test_a_probe_into_a_still_frozen_redis_reopens_and_others_do_not_wait(
    stores: Stores,
) -> None:
    ledger = stores.ledger
    stores.server.freeze()
    for _ in range(3):
        assert await ledger.atry_spend("chat_gen") == UNAVAILABLE
    await asyncio.sleep(stores.breaker.snapshot().retry_in_s + 0.05)

    probing = asyncio.create_task(ledger.atry_spend("chat_gen"))
    while stores.breaker.snapshot().available:  # until the probe is admitted
        await asyncio.sleep(0.001)
    others, took = await _atimed(asyncio.gather(*(ledger.asnapshot() for _ in range(10))))
    assert others == [QuotaSnapshot({"chat_gen": 0}, available=False)] * 10
    assert took < 0.05  # refused at once while the probe waits on the frozen server
    await probing
    snapshot = stores.breaker.snapshot()
    assert snapshot.state == "open" and snapshot.consecutive_failures == 4
    assert snapshot.retry_in_s > RESET_S - SLACK_S


# --- a healthy Redis behind a full connection pool ------------------------------------------


@pytest.mark.redis
async def test_a_full_connection_pool_is_overload_not_an_outage(
    redis_url: str, redis_prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    # The auditor's D3 (scratch/load/d3_redis_pool_queue.py): with more turns in flight than
    # pooled connections, calls that waited out the pool ("No connection available") were
    # counted as Redis failures and opened the breaker in front of a healthy server. Here the
    # one connection of each pool is held, so every call waits out its pool.
    import redis
    import redis.asyncio

    aclient = redis.asyncio.Redis(
        connection_pool=redis.asyncio.BlockingConnectionPool.from_url(
            redis_url, max_connections=1, timeout=0.05
        )
    )
    breaker = CircuitBreaker(failure_threshold=3, reset_after_s=RESET_S)
    ledger = RedisQuotaLedger(
        {"chat_gen": 5}, aclient=aclient, breaker=breaker, prefix=redis_prefix
    )
    cache = RedisCache(aclient=aclient, breaker=breaker, prefix=redis_prefix)
    aheld = await aclient.connection_pool.get_connection()
    try:
        with caplog.at_level("WARNING", logger="ragtiller.stores"):
            for _ in range(2 * breaker.failure_threshold):
                # a quota still fails closed
                assert await ledger.atry_spend("chat_gen") == UNAVAILABLE
                assert (await ledger.asnapshot()).available is False
                assert await cache.aget("k") is None  # a cache still fails open
        assert breaker.snapshot() == BreakerSnapshot("closed", 0, 0.0, available=True)
        assert "Redis overloaded" in caplog.text
        assert "circuit open" not in caplog.text
    finally:
        await aclient.connection_pool.release(aheld)
    assert await ledger.atry_spend("chat_gen") == SpendResult(True, 4)
    assert (await ledger.asnapshot()).remaining == {"chat_gen": 4}
    await aclient.connection_pool.disconnect()
