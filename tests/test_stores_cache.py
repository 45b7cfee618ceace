"""One contract for every cache: memory and a real Redis pass the same tests."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import pytest

from ragtiller.errors import ConfigurationError
from ragtiller.stores import Cache, MemoryCache, RedisCache


class FakeMonotonic:
    """A monotonic clock that moves only when told."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class CacheEnv:
    """A cache of one backend, and how to let time pass for it."""

    cache: Cache
    advance: Callable[[float], None]
    make_peer: Callable[[], Cache]
    """Another cache over the same store (Redis: a second client; memory: the same object)."""


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
async def env(request: pytest.FixtureRequest, redis_prefix: str) -> AsyncIterator[CacheEnv]:
    """A fresh cache: memory with a fake clock, or Redis (real time) under its own prefix."""
    made: list[Cache] = []
    if request.param == "memory":
        clock = FakeMonotonic()
        cache: Cache = MemoryCache(clock=clock)
        yield CacheEnv(cache, clock.advance, lambda: cache)
        return
    url = request.getfixturevalue("redis_url")

    def make() -> Cache:
        made.append(RedisCache(url=url, prefix=redis_prefix))
        return made[-1]

    yield CacheEnv(make(), time.sleep, make)
    for cache in made:
        await cache.aclose()


async def test_a_missing_key_is_none(env: CacheEnv) -> None:
    assert env.cache.get("absent") is None
    assert await env.cache.aget("absent") is None


@pytest.mark.parametrize(
    "value",
    ["text", "", 0, 3.5, True, ["a", 1], {"k": {"nested": [1, None]}}, "naïve ☃"],
)
async def test_values_round_trip(env: CacheEnv, value: Any) -> None:
    env.cache.set("sync", value, ttl_s=60)
    await env.cache.aset("async", value, ttl_s=60)
    peer = env.make_peer()
    assert peer.get("sync") == value
    assert await peer.aget("sync") == value
    assert peer.get("async") == value


async def test_values_come_back_as_json_would_return_them(env: CacheEnv) -> None:
    value = {"ids": (1, 2)}
    env.cache.set("k", value, ttl_s=60)
    got = env.cache.get("k")
    assert got == {"ids": [1, 2]}
    got["ids"].append(3)
    assert env.cache.get("k") == {"ids": [1, 2]}


async def test_set_overwrites(env: CacheEnv) -> None:
    env.cache.set("k", "old", ttl_s=60)
    await env.cache.aset("k", "new", ttl_s=60)
    assert env.cache.get("k") == "new"


async def test_entries_expire_after_their_ttl(env: CacheEnv) -> None:
    env.cache.set("short", "v", ttl_s=0.3)
    env.cache.set("long", "v", ttl_s=60)
    assert env.cache.get("short") == "v"
    env.advance(0.5)
    assert env.cache.get("short") is None
    assert await env.cache.aget("short") is None
    assert env.cache.get("long") == "v"


async def test_a_non_json_value_is_a_type_error(env: CacheEnv) -> None:
    with pytest.raises(TypeError, match=r"^cache values must be JSON-serialisable, but got object"):
        env.cache.set("k", object(), ttl_s=60)
    with pytest.raises(TypeError, match=r"^cache values must be JSON-serialisable, but got set"):
        env.cache.get_or_compute("k", lambda: {1, 2}, ttl_s=60)
    assert env.cache.get("k") is None


@pytest.mark.parametrize("ttl_s", [0, -1.0, float("inf"), float("nan")])
async def test_ttl_must_be_positive_and_finite(env: CacheEnv, ttl_s: float) -> None:
    message = r"^ttl_s must be a finite number of seconds > 0, but got"
    with pytest.raises(ValueError, match=message):
        env.cache.set("k", 1, ttl_s=ttl_s)
    with pytest.raises(ValueError, match=message):
        await env.cache.aset("k", 1, ttl_s=ttl_s)
    with pytest.raises(ValueError, match=message):
        env.cache.get_or_compute("k", lambda: 1, ttl_s=ttl_s)


async def test_clear_removes_every_entry(env: CacheEnv) -> None:
    for i in range(5):
        env.cache.set(f"k{i}", i, ttl_s=60)
    env.cache.clear()
    assert [env.cache.get(f"k{i}") for i in range(5)] == [None] * 5


async def test_get_or_compute_computes_once_then_hits(env: CacheEnv) -> None:
    calls: list[int] = []

    def compute() -> dict[str, int]:
        calls.append(1)
        return {"n": len(calls)}

    assert env.cache.get_or_compute("k", compute, ttl_s=60) == ({"n": 1}, False)
    assert env.cache.get_or_compute("k", compute, ttl_s=60) == ({"n": 1}, True)
    assert env.make_peer().get_or_compute("k", compute, ttl_s=60) == ({"n": 1}, True)
    assert len(calls) == 1


async def test_aget_or_compute_computes_once_then_hits(env: CacheEnv) -> None:
    calls: list[int] = []

    async def compute() -> str:
        calls.append(1)
        return "generalized"

    assert await env.cache.aget_or_compute("k", compute, ttl_s=60) == ("generalized", False)
    assert await env.cache.aget_or_compute("k", compute, ttl_s=60) == ("generalized", True)
    assert env.cache.get("k") == "generalized"
    assert len(calls) == 1


async def test_a_computed_none_is_cached(env: CacheEnv) -> None:
    calls: list[int] = []

    def compute() -> None:
        calls.append(1)

    assert env.cache.get_or_compute("k", compute, ttl_s=60) == (None, False)
    assert env.cache.get_or_compute("k", compute, ttl_s=60) == (None, True)
    assert len(calls) == 1


async def test_computed_entries_expire(env: CacheEnv) -> None:
    calls: list[int] = []

    def compute() -> int:
        calls.append(1)
        return len(calls)

    assert env.cache.get_or_compute("k", compute, ttl_s=0.3) == (1, False)
    env.advance(0.5)
    assert env.cache.get_or_compute("k", compute, ttl_s=0.3) == (2, False)


def _run_threads(count: int, target: Callable[[], Any]) -> tuple[list[Any], list[BaseException]]:
    """Start ``count`` threads together on ``target``; their results and exceptions."""
    start = threading.Barrier(count)
    results: list[Any] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def run() -> None:
        start.wait()
        try:
            result = target()
        except Exception as e:
            with lock:
                errors.append(e)
        else:
            with lock:
                results.append(result)

    threads = [threading.Thread(target=run) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results, errors


async def test_50_threads_missing_one_key_share_one_computation(env: CacheEnv) -> None:
    calls: list[int] = []

    def compute() -> dict[str, str]:
        calls.append(1)
        time.sleep(0.3)
        return {"generalized": "getting started"}

    results, errors = _run_threads(50, lambda: env.cache.get_or_compute("broad", compute, ttl_s=60))
    assert errors == []
    assert len(calls) == 1
    assert len(results) == 50
    assert all(value == {"generalized": "getting started"} for value, _ in results)
    assert sorted(from_cache for _, from_cache in results) == [False] + [True] * 49


async def test_50_tasks_missing_one_key_share_one_computation(env: CacheEnv) -> None:
    calls: list[int] = []

    async def compute() -> list[str]:
        calls.append(1)
        await asyncio.sleep(0.2)
        return ["a", "b"]

    results = await asyncio.gather(
        *(env.cache.aget_or_compute("broad", compute, ttl_s=60) for _ in range(50))
    )
    assert len(calls) == 1
    assert all(value == ["a", "b"] for value, _ in results)
    assert sorted(from_cache for _, from_cache in results) == [False] + [True] * 49


async def test_a_failed_computation_reaches_every_thread_and_is_not_cached(env: CacheEnv) -> None:
    calls: list[int] = []

    def fail() -> str:
        calls.append(1)
        time.sleep(0.5)
        raise RuntimeError("llm timeout")

    results, errors = _run_threads(20, lambda: env.cache.get_or_compute("k", fail, ttl_s=60))
    assert results == []
    assert len(errors) == 20
    assert all(isinstance(e, RuntimeError) and str(e) == "llm timeout" for e in errors)
    assert len(calls) == 1
    assert env.cache.get("k") is None
    assert env.cache.get_or_compute("k", lambda: "recovered", ttl_s=60) == ("recovered", False)


async def test_a_failed_computation_reaches_every_task_and_is_not_cached(env: CacheEnv) -> None:
    calls: list[int] = []

    async def fail() -> str:
        calls.append(1)
        await asyncio.sleep(0.2)
        raise RuntimeError("llm timeout")

    async def recover() -> str:
        return "recovered"

    outcomes = await asyncio.gather(
        *(env.cache.aget_or_compute("k", fail, ttl_s=60) for _ in range(50)),
        return_exceptions=True,
    )
    assert all(isinstance(o, RuntimeError) and str(o) == "llm timeout" for o in outcomes)
    assert len(calls) == 1
    assert await env.cache.aget("k") is None
    assert await env.cache.aget_or_compute("k", recover, ttl_s=60) == ("recovered", False)


async def test_cancelling_the_first_caller_does_not_cancel_the_computation(env: CacheEnv) -> None:
    calls: list[int] = []
    started = asyncio.Event()

    async def compute() -> str:
        calls.append(1)
        started.set()
        await asyncio.sleep(0.2)
        return "done"

    first = asyncio.create_task(env.cache.aget_or_compute("k", compute, ttl_s=60))
    await started.wait()
    second = asyncio.create_task(env.cache.aget_or_compute("k", compute, ttl_s=60))
    await asyncio.sleep(0.05)
    first.cancel()
    assert await second == ("done", True)
    assert first.cancelled()
    assert len(calls) == 1
    assert await env.cache.aget("k") == "done"


def test_memory_cache_evicts_the_oldest_entry_past_max_entries() -> None:
    cache = MemoryCache(max_entries=2)
    cache.set("a", 1, ttl_s=60)
    cache.set("b", 2, ttl_s=60)
    cache.set("a", 10, ttl_s=60)  # rewriting "a" makes "b" the oldest
    cache.set("c", 3, ttl_s=60)
    assert [cache.get(k) for k in "abc"] == [10, None, 3]


def test_memory_cache_needs_room_for_one_entry() -> None:
    with pytest.raises(ConfigurationError, match=r"^max_entries must be >= 1, but got 0$"):
        MemoryCache(max_entries=0)
