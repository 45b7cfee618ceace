"""The cache contract: JSON values with a TTL, single-flight computations, and fail open."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

import pytest

from ragtiller.stores import Cache
from ragtiller.testing._fixtures import Opened, in_loop, opened, required

CacheFactory = Callable[[], Cache]
"""What ``make_cache`` returns: a cache over the test's one store (new client or same object)."""


class CacheContract:
    """The cache contract as pytest tests; subclass it with a ``make_cache`` fixture."""

    make_cache = required("make_cache", "CacheContract")

    @pytest.fixture
    def advance_time(self) -> Callable[[float], None]:
        """Let that many seconds pass for the cache's TTLs; override with a fake clock's."""
        return time.sleep

    caches = opened("make_cache", Cache)

    @pytest.fixture
    def cache(self, caches: Opened[Cache]) -> Cache:
        """The first cache over the test's store."""
        return caches()

    @in_loop
    async def test_a_missing_key_is_none(self, caches: Opened[Cache], cache: Cache) -> None:
        assert await cache.aget("absent") is None

    @pytest.mark.parametrize(
        "value",
        ["text", "", 0, 3.5, True, ["a", 1], {"k": {"nested": [1, None]}}, "naïve ☃"],
    )
    @in_loop
    async def test_values_round_trip(self, caches: Opened[Cache], cache: Cache, value: Any) -> None:
        await cache.aset("k", value, ttl_s=60)
        assert await caches().aget("k") == value

    @in_loop
    async def test_values_come_back_as_json_would_return_them(
        self, caches: Opened[Cache], cache: Cache
    ) -> None:
        await cache.aset("k", {"ids": (1, 2)}, ttl_s=60)
        got = await cache.aget("k")
        assert got == {"ids": [1, 2]}
        got["ids"].append(3)
        assert await cache.aget("k") == {"ids": [1, 2]}

    @in_loop
    async def test_set_overwrites(self, caches: Opened[Cache], cache: Cache) -> None:
        await cache.aset("k", "old", ttl_s=60)
        await cache.aset("k", "new", ttl_s=60)
        assert await cache.aget("k") == "new"

    @in_loop
    async def test_entries_expire_after_their_ttl(
        self, caches: Opened[Cache], cache: Cache, advance_time: Callable[[float], None]
    ) -> None:
        await cache.aset("short", "v", ttl_s=0.3)
        await cache.aset("long", "v", ttl_s=60)
        assert await cache.aget("short") == "v"
        advance_time(0.5)
        assert await cache.aget("short") is None
        assert await cache.aget("long") == "v"

    @in_loop
    async def test_a_non_json_value_is_a_type_error(
        self, caches: Opened[Cache], cache: Cache
    ) -> None:
        message = r"^cache values must be JSON-serialisable, but got "
        with pytest.raises(TypeError, match=message + "object"):
            await cache.aset("k", object(), ttl_s=60)
        with pytest.raises(TypeError, match=message + "set"):
            await cache.aget_or_compute("k", lambda: asyncio.sleep(0, {1, 2}), ttl_s=60)
        assert await cache.aget("k") is None

    @pytest.mark.parametrize("ttl_s", [0, -1.0, float("inf"), float("nan")])
    @in_loop
    async def test_ttl_must_be_positive_and_finite(
        self, caches: Opened[Cache], cache: Cache, ttl_s: float
    ) -> None:
        message = r"^ttl_s must be a finite number of seconds > 0, but got"
        with pytest.raises(ValueError, match=message):
            await cache.aset("k", 1, ttl_s=ttl_s)
        with pytest.raises(ValueError, match=message):
            await cache.aget_or_compute("k", lambda: asyncio.sleep(0, 1), ttl_s=ttl_s)

    def test_clear_removes_every_entry(self, caches: Opened[Cache], cache: Cache) -> None:
        async def fill() -> None:
            for i in range(5):
                await cache.aset(f"k{i}", i, ttl_s=60)

        async def read() -> list[Any]:
            return [await cache.aget(f"k{i}") for i in range(5)]

        caches.run(fill)
        cache.clear()
        assert caches.run(read) == [None] * 5

    @in_loop
    async def test_aget_or_compute_computes_once_then_hits(
        self, caches: Opened[Cache], cache: Cache
    ) -> None:
        calls: list[int] = []

        async def compute() -> dict[str, int]:
            calls.append(1)
            return {"n": len(calls)}

        assert await cache.aget_or_compute("k", compute, ttl_s=60) == ({"n": 1}, False)
        assert await cache.aget_or_compute("k", compute, ttl_s=60) == ({"n": 1}, True)
        assert await caches().aget_or_compute("k", compute, ttl_s=60) == ({"n": 1}, True)
        assert await cache.aget("k") == {"n": 1}
        assert len(calls) == 1

    @in_loop
    async def test_a_computed_none_is_cached(self, caches: Opened[Cache], cache: Cache) -> None:
        calls: list[int] = []

        async def compute() -> None:
            calls.append(1)

        assert await cache.aget_or_compute("k", compute, ttl_s=60) == (None, False)
        assert await cache.aget_or_compute("k", compute, ttl_s=60) == (None, True)
        assert len(calls) == 1

    @in_loop
    async def test_computed_entries_expire(
        self, caches: Opened[Cache], cache: Cache, advance_time: Callable[[float], None]
    ) -> None:
        calls: list[int] = []

        async def compute() -> int:
            calls.append(1)
            return len(calls)

        assert await cache.aget_or_compute("k", compute, ttl_s=0.3) == (1, False)
        advance_time(0.5)
        assert await cache.aget_or_compute("k", compute, ttl_s=0.3) == (2, False)

    def test_50_tasks_missing_one_key_share_one_computation(
        self, caches: Opened[Cache], cache: Cache
    ) -> None:
        calls: list[int] = []

        async def compute() -> list[str]:
            calls.append(1)
            await asyncio.sleep(0.2)
            return ["a", "b"]

        async def main() -> list[tuple[list[str], bool]]:
            return await asyncio.gather(
                *(cache.aget_or_compute("broad", compute, ttl_s=60) for _ in range(50))
            )

        results = caches.run(main)
        assert len(calls) == 1
        assert all(value == ["a", "b"] for value, _ in results)
        assert sorted(from_cache for _, from_cache in results) == [False] + [True] * 49

    @in_loop
    async def test_a_failed_computation_reaches_every_task_and_is_not_cached(
        self, caches: Opened[Cache], cache: Cache
    ) -> None:
        calls: list[int] = []

        async def fail() -> str:
            calls.append(1)
            await asyncio.sleep(0.2)
            raise RuntimeError("llm timeout")

        outcomes = await asyncio.gather(
            *(cache.aget_or_compute("k", fail, ttl_s=60) for _ in range(50)),
            return_exceptions=True,
        )
        assert all(isinstance(o, RuntimeError) and str(o) == "llm timeout" for o in outcomes)
        assert len(calls) == 1
        assert await cache.aget("k") is None
        assert await cache.aget_or_compute(
            "k", lambda: asyncio.sleep(0, "recovered"), ttl_s=60
        ) == ("recovered", False)

    @in_loop
    async def test_cancelling_the_first_caller_does_not_cancel_the_computation(
        self, caches: Opened[Cache], cache: Cache
    ) -> None:
        calls: list[int] = []
        started = asyncio.Event()

        async def compute() -> str:
            calls.append(1)
            started.set()
            await asyncio.sleep(0.2)
            return "done"

        first = asyncio.create_task(cache.aget_or_compute("k", compute, ttl_s=60))
        await started.wait()
        second = asyncio.create_task(cache.aget_or_compute("k", compute, ttl_s=60))
        await asyncio.sleep(0.05)
        first.cancel()
        assert await second == ("done", True)
        assert first.cancelled()
        assert len(calls) == 1
        assert await cache.aget("k") == "done"


class CacheOutageContract:
    """A cache whose store does not answer fails open (a miss), logged, and never raises."""

    make_unreachable_cache = required("make_unreachable_cache", "CacheOutageContract")
    unreachable_caches = opened("make_unreachable_cache", Cache)

    @in_loop
    async def test_an_unreachable_store_is_a_miss_and_never_raises(
        self, unreachable_caches: Opened[Cache], caplog: pytest.LogCaptureFixture
    ) -> None:
        cache = unreachable_caches()

        with caplog.at_level(logging.WARNING, logger="ragtiller.stores"):
            await cache.aset("k", "v", ttl_s=60)
            assert await cache.aget("k") is None
            computed = await cache.aget_or_compute("k", lambda: asyncio.sleep(0, "v2"), ttl_s=60)
            assert computed == ("v2", False)
        messages = [r.getMessage() for r in caplog.records if r.name == "ragtiller.stores"]
        assert any(m.startswith("cache unavailable; k is a miss") for m in messages)
        assert any(m.startswith("cache unavailable; k not stored") for m in messages)

    def test_bad_values_are_still_errors_when_the_store_is_down(
        self, unreachable_caches: Opened[Cache]
    ) -> None:
        cache = unreachable_caches()
        with pytest.raises(TypeError, match=r"^cache values must be JSON-serialisable"):
            asyncio.run(cache.aset("k", object(), ttl_s=60))
        with pytest.raises(ValueError, match=r"^ttl_s must be a finite number of seconds > 0"):
            asyncio.run(cache.aset("k", 1, ttl_s=0))
