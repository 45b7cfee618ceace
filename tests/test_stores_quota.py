"""Every quota ledger runs the public contract of ``ragtiller.testing``, as a store author would:
in memory, and in a real redis-server (each test under its own key prefix, and unreachable)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from fixtures.contracts import failed_tests
from fixtures.redis_server import unreachable_url

from ragtiller.stores import MemoryQuotaLedger, QuotaLedger, RedisQuotaLedger
from ragtiller.testing import LedgerFactory, QuotaLedgerContract, QuotaLedgerOutageContract


class TestMemoryQuotaLedger(QuotaLedgerContract):
    @pytest.fixture
    def make_ledger(self) -> LedgerFactory:
        return MemoryQuotaLedger


@pytest.mark.redis
class TestRedisQuotaLedger(QuotaLedgerContract, QuotaLedgerOutageContract):
    @pytest.fixture
    def make_ledger(self, redis_url: str, redis_prefix: str) -> LedgerFactory:
        def make(limits: Mapping[str, int], **kwargs: Any) -> QuotaLedger:
            return RedisQuotaLedger(limits, url=redis_url, prefix=redis_prefix, **kwargs)

        return make

    @pytest.fixture
    def make_unreachable_ledger(self) -> LedgerFactory:
        url = unreachable_url()

        def make(limits: Mapping[str, int], **kwargs: Any) -> QuotaLedger:
            return RedisQuotaLedger(limits, url=url, **kwargs)

        return make


# --- the contract can fail --------------------------------------------------------------------

BROKEN = """
import asyncio

import pytest
from ragtiller.stores import MemoryQuotaLedger
from ragtiller.testing import QuotaLedgerContract, QuotaLedgerOutageContract


class RacyAndForgetful(MemoryQuotaLedger):
    # reads, then writes, without the lock; and never turns the day
    async def _achange(self, counters, n, window):
        used = [self._spent.get(counter, 0) for counter, _ in counters]
        await asyncio.sleep(0.001)
        spent = n > 0 and all(u + n <= limit for u, (_, limit) in zip(used, counters))
        if spent or n < 0:
            used = [max(0, u + n) for u in used]
            self._spent.update((counter, u) for (counter, _), u in zip(counters, used))
        return spent, [max(0, limit - u) for u, (_, limit) in zip(used, counters)]


class RaisesItsOwnErrors(MemoryQuotaLedger):
    # a store down that raises ConnectionError instead of StoreUnavailableError
    async def _achange(self, *args):
        raise ConnectionError("down")


class TestBroken(QuotaLedgerContract, QuotaLedgerOutageContract):
    @pytest.fixture
    def make_ledger(self):
        return RacyAndForgetful

    @pytest.fixture
    def make_unreachable_ledger(self):
        return RaisesItsOwnErrors
"""


def test_the_contract_fails_a_ledger_that_breaks_it(tmp_path: Path) -> None:
    failed = {name.split("::")[-1] for name in failed_tests(tmp_path, BROKEN)}
    assert {
        "test_200_tasks_on_a_budget_of_20_get_exactly_20",
        "test_window_rolls_over_at_utc_midnight",
        "test_window_is_the_calendar_day_of_the_timezone",
        "test_an_unreachable_store_fails_closed_and_never_raises",
    } <= failed
    assert "test_spend_remaining_refund" not in failed
    assert "test_bad_calls_are_still_errors_when_the_store_is_down" not in failed
