"""Every cache runs the public contract of ``ragtiller.testing``, as a store author would: in
memory (on a fake clock), and in a real redis-server (each test under its own key prefix, and
unreachable); then what only the memory cache promises."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest
from fixtures.contracts import failed_tests
from fixtures.redis_server import unreachable_url

from ragtiller.errors import ConfigurationError
from ragtiller.stores import MemoryCache, RedisCache
from ragtiller.testing import CacheContract, CacheFactory, CacheOutageContract


class FakeMonotonic:
    """A monotonic clock that moves only when told."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class TestMemoryCache(CacheContract):
    @pytest.fixture
    def clock(self) -> FakeMonotonic:
        return FakeMonotonic()

    @pytest.fixture
    def make_cache(self, clock: FakeMonotonic) -> CacheFactory:
        cache = MemoryCache(clock=clock)
        return lambda: cache  # one process: every caller shares the object

    @pytest.fixture
    def advance_time(self, clock: FakeMonotonic) -> Callable[[float], None]:
        return clock.advance


@pytest.mark.redis
class TestRedisCache(CacheContract, CacheOutageContract):
    @pytest.fixture
    def make_cache(self, redis_url: str, redis_prefix: str) -> CacheFactory:
        return lambda: RedisCache(url=redis_url, prefix=redis_prefix)

    @pytest.fixture
    def make_unreachable_cache(self) -> CacheFactory:
        url = unreachable_url()
        return lambda: RedisCache(url=url)


def test_memory_cache_evicts_the_oldest_entry_past_max_entries() -> None:
    cache = MemoryCache(max_entries=2)

    async def main() -> list[object]:
        await cache.aset("a", 1, ttl_s=60)
        await cache.aset("b", 2, ttl_s=60)
        await cache.aset("a", 10, ttl_s=60)  # rewriting "a" makes "b" the oldest
        await cache.aset("c", 3, ttl_s=60)
        return [await cache.aget(k) for k in "abc"]

    assert asyncio.run(main()) == [10, None, 3]


def test_memory_cache_needs_room_for_one_entry() -> None:
    with pytest.raises(ConfigurationError, match=r"^max_entries must be >= 1, but got 0$"):
        MemoryCache(max_entries=0)


# --- the contract can fail --------------------------------------------------------------------

BROKEN = """
import pytest
from ragtiller.stores import MemoryCache
from ragtiller.testing import CacheContract


class EagerAndEverlasting(MemoryCache):
    # no single flight, a cached None is a miss, and nothing expires
    async def aget_or_compute(self, key, compute, ttl_s, *, accept=None):
        found = await self.aget(key)
        if found is not None:
            return found, True
        value = await compute()
        await self.aset(key, value, ttl_s)
        return value, False

    async def _aset_text(self, key, text, ttl_s):
        await super()._aset_text(key, text, 1e9)


class TestBroken(CacheContract):
    @pytest.fixture
    def make_cache(self):
        cache = EagerAndEverlasting()
        return lambda: cache
"""


def test_the_contract_fails_a_cache_that_breaks_it(tmp_path: Path) -> None:
    failed = {name.split("::")[-1] for name in failed_tests(tmp_path, BROKEN)}
    assert {
        "test_entries_expire_after_their_ttl",
        "test_computed_entries_expire",
        "test_a_computed_none_is_cached",
        "test_50_tasks_missing_one_key_share_one_computation",
        "test_a_failed_computation_reaches_every_task_and_is_not_cached",
    } <= failed
    assert "test_values_round_trip" not in failed
    assert "test_clear_removes_every_entry" not in failed
