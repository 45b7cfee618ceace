"""Every cache runs the public contract of ``ragtiller.testing``, as a store author would: in
memory (on a fake clock), and in a real redis-server (each test under its own key prefix, and
unreachable); then what only the memory cache promises."""

from __future__ import annotations

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
    cache.set("a", 1, ttl_s=60)
    cache.set("b", 2, ttl_s=60)
    cache.set("a", 10, ttl_s=60)  # rewriting "a" makes "b" the oldest
    cache.set("c", 3, ttl_s=60)
    assert [cache.get(k) for k in "abc"] == [10, None, 3]


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
    def get_or_compute(self, key, compute, ttl_s, *, accept=None):
        found = self.get(key)
        if found is not None:
            return found, True
        value = compute()
        self.set(key, value, ttl_s)
        return value, False

    def _set_text(self, key, text, ttl_s):
        super()._set_text(key, text, 1e9)


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
        "test_50_threads_missing_one_key_share_one_computation",
        "test_a_failed_computation_reaches_every_thread_and_is_not_cached",
    } <= failed
    assert "test_values_round_trip" not in failed
    assert "test_50_tasks_missing_one_key_share_one_computation" not in failed
