"""One contract for every quota ledger: memory and a real Redis pass the same tests."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from ragtiller.errors import ConfigurationError, RagtillerError
from ragtiller.stores import (
    MemoryQuotaLedger,
    QuotaLedger,
    QuotaSnapshot,
    RedisQuotaLedger,
    SpendResult,
    UnknownResourceError,
)

LIMITS = {"chat_gen": 3, "rerank_calls": 20, "disabled": 0}


class FakeClock:
    """A wall clock that moves only when told."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


MakeLedger = Callable[..., QuotaLedger]


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
async def make_ledger(
    request: pytest.FixtureRequest, redis_prefix: str
) -> AsyncIterator[MakeLedger]:
    """Builds ledgers of one backend (each Redis test gets its own key prefix); closes them."""
    url = request.getfixturevalue("redis_url") if request.param == "redis" else ""
    made: list[QuotaLedger] = []

    def make(limits: Mapping[str, int] = LIMITS, **kwargs: Any) -> QuotaLedger:
        ledger: QuotaLedger
        if url:
            ledger = RedisQuotaLedger(limits, url=url, prefix=redis_prefix, **kwargs)
        else:
            ledger = MemoryQuotaLedger(limits, **kwargs)
        made.append(ledger)
        return ledger

    yield make
    for ledger in made:
        await ledger.aclose()


class Api:
    """Calls the sync or the async twin of each ledger method, so one test covers both."""

    def __init__(self, use_async: bool) -> None:
        self.use_async = use_async

    async def spend(self, ledger: QuotaLedger, resource: str, n: int = 1) -> SpendResult:
        if self.use_async:
            return await ledger.atry_spend(resource, n)
        return ledger.try_spend(resource, n)

    async def refund(self, ledger: QuotaLedger, resource: str, n: int = 1) -> None:
        if self.use_async:
            await ledger.arefund(resource, n)
        else:
            ledger.refund(resource, n)

    async def snapshot(
        self, ledger: QuotaLedger, resources: list[str] | None = None
    ) -> QuotaSnapshot:
        if self.use_async:
            return await ledger.asnapshot(resources)
        return ledger.snapshot(resources)

    async def remaining(self, ledger: QuotaLedger, resource: str) -> int:
        if self.use_async:
            return await ledger.aremaining(resource)
        return ledger.remaining(resource)


@pytest.fixture(params=["sync", "async"])
def api(request: pytest.FixtureRequest) -> Api:
    return Api(request.param == "async")


async def test_spend_remaining_refund(make_ledger: MakeLedger, api: Api) -> None:
    ledger = make_ledger()
    assert await api.remaining(ledger, "chat_gen") == 3
    assert await api.spend(ledger, "chat_gen") == SpendResult(allowed=True, remaining=2)
    assert await api.spend(ledger, "chat_gen", 2) == SpendResult(allowed=True, remaining=0)
    assert await api.spend(ledger, "chat_gen") == SpendResult(False, 0, "quota")
    await api.refund(ledger, "chat_gen")
    assert await api.remaining(ledger, "chat_gen") == 1
    assert await api.spend(ledger, "chat_gen") == SpendResult(allowed=True, remaining=0)


async def test_snapshot_reads_several_budgets_at_once(make_ledger: MakeLedger, api: Api) -> None:
    ledger = make_ledger()
    assert ledger.available
    await api.spend(ledger, "chat_gen", 2)
    await api.spend(ledger, "rerank_calls", 5)
    reading = await api.snapshot(ledger, ["rerank_calls", "chat_gen", "rerank_calls"])
    assert reading == QuotaSnapshot({"rerank_calls": 15, "chat_gen": 1}, available=True)
    assert list(reading.remaining) == ["rerank_calls", "chat_gen"]
    everything = await api.snapshot(ledger)
    assert everything == QuotaSnapshot(
        {"chat_gen": 1, "rerank_calls": 15, "disabled": 0}, available=True
    )
    assert await api.snapshot(ledger, []) == QuotaSnapshot({}, available=True)
    with pytest.raises(UnknownResourceError, match="unknown quota resource 'chat'"):
        await api.snapshot(ledger, ["chat_gen", "chat"])


async def test_refund_never_raises_the_budget_above_the_limit(
    make_ledger: MakeLedger, api: Api
) -> None:
    ledger = make_ledger()
    await api.refund(ledger, "chat_gen", 5)
    assert await api.remaining(ledger, "chat_gen") == 3
    await api.spend(ledger, "chat_gen")
    await api.refund(ledger, "chat_gen", 5)
    assert await api.remaining(ledger, "chat_gen") == 3
    assert (await api.spend(ledger, "chat_gen", 4)).allowed is False


async def test_limit_zero_refuses_every_spend(make_ledger: MakeLedger, api: Api) -> None:
    ledger = make_ledger()
    assert ledger.limit("disabled") == 0
    assert await api.remaining(ledger, "disabled") == 0
    assert await api.spend(ledger, "disabled") == SpendResult(False, 0, "quota")


async def test_a_spend_larger_than_the_rest_is_refused_whole(
    make_ledger: MakeLedger, api: Api
) -> None:
    ledger = make_ledger({"chat_gen": 5})
    assert (await api.spend(ledger, "chat_gen", 3)).allowed
    assert await api.spend(ledger, "chat_gen", 3) == SpendResult(False, 2, "quota")
    assert await api.remaining(ledger, "chat_gen") == 2
    assert await api.spend(ledger, "chat_gen", 2) == SpendResult(True, 0)


async def test_resources_have_separate_budgets(make_ledger: MakeLedger, api: Api) -> None:
    ledger = make_ledger()
    assert (await api.spend(ledger, "chat_gen", 3)).allowed
    assert await api.remaining(ledger, "chat_gen") == 0
    assert await api.remaining(ledger, "rerank_calls") == 20
    assert await api.spend(ledger, "rerank_calls", 20) == SpendResult(True, 0)


async def test_unknown_resource_is_a_clear_error(make_ledger: MakeLedger, api: Api) -> None:
    ledger = make_ledger()
    message = r"^unknown quota resource 'chat'; known resources: chat_gen, disabled, rerank_calls$"
    with pytest.raises(UnknownResourceError, match=message) as caught:
        ledger.limit("chat")
    assert isinstance(caught.value, KeyError)
    assert isinstance(caught.value, RagtillerError)
    with pytest.raises(UnknownResourceError, match=message):
        await api.spend(ledger, "chat")
    with pytest.raises(UnknownResourceError, match=message):
        await api.refund(ledger, "chat")
    with pytest.raises(UnknownResourceError, match=message):
        await api.remaining(ledger, "chat")


@pytest.mark.parametrize("n", [0, -1, True, 1.5])
async def test_spend_and_refund_need_a_positive_int(
    make_ledger: MakeLedger, api: Api, n: Any
) -> None:
    ledger = make_ledger()
    with pytest.raises(ValueError, match=r"^n must be an int >= 1, but got"):
        await api.spend(ledger, "chat_gen", n)
    with pytest.raises(ValueError, match=r"^n must be an int >= 1, but got"):
        await api.refund(ledger, "chat_gen", n)
    assert await api.remaining(ledger, "chat_gen") == 3


async def test_window_rolls_over_at_utc_midnight(make_ledger: MakeLedger, api: Api) -> None:
    clock = FakeClock(datetime(2026, 6, 16, 23, 59, 59, tzinfo=UTC))
    ledger = make_ledger(clock=clock)
    assert (await api.spend(ledger, "chat_gen", 3)).allowed
    assert await api.spend(ledger, "chat_gen") == SpendResult(False, 0, "quota")
    clock.advance(seconds=1)
    assert ledger.window().id == "2026-06-17"
    assert await api.remaining(ledger, "chat_gen") == 3
    assert await api.spend(ledger, "chat_gen") == SpendResult(True, 2)


async def test_window_is_the_calendar_day_of_the_timezone(
    make_ledger: MakeLedger, api: Api
) -> None:
    # 04:30 UTC on 10 March is 23:30 on 9 March in New York: the New York day ends at 05:00 UTC.
    clock = FakeClock(datetime(2024, 3, 10, 4, 30, tzinfo=UTC))
    new_york = make_ledger(clock=clock, timezone="America/New_York")
    utc = make_ledger(clock=clock)
    assert new_york.window().id == "2024-03-09"
    assert (await api.spend(new_york, "chat_gen", 3)).allowed
    assert (await api.spend(utc, "rerank_calls", 20)).allowed
    clock.advance(minutes=30)
    assert new_york.window().id == "2024-03-10"
    assert await api.remaining(new_york, "chat_gen") == 3
    assert utc.window().id == "2024-03-10"
    assert await api.remaining(utc, "rerank_calls") == 0


def test_window_length_follows_daylight_saving_time() -> None:
    # New York springs forward on 10 March 2024: that local day lasts 23 hours.
    clock = FakeClock(datetime(2024, 3, 10, 5, 0, tzinfo=UTC))
    ledger = MemoryQuotaLedger(LIMITS, timezone="America/New_York", clock=clock)
    assert ledger.window().id == "2024-03-10"
    assert ledger.window().seconds_left == 23 * 3600
    assert ledger.timezone == "America/New_York"


def test_a_naive_clock_reads_as_utc() -> None:
    ledger = MemoryQuotaLedger(LIMITS, clock=lambda: datetime(2026, 1, 1, 23, 0))
    assert ledger.window().id == "2026-01-01"
    assert ledger.window().seconds_left == 3600


@pytest.mark.parametrize(
    ("limits", "timezone", "message"),
    [
        ({"chat_gen": -1}, "UTC", r"ints >= 0, but got 'chat_gen': -1"),
        ({"chat_gen": 2.5}, "UTC", r"ints >= 0, but got 'chat_gen': 2.5"),
        ({"": 1}, "UTC", r"non-empty resource names"),
        ({"chat_gen": 1}, "Mars/Olympus", r"unknown timezone 'Mars/Olympus'; use an IANA name"),
    ],
)
def test_bad_configuration_is_rejected(limits: dict[str, Any], timezone: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        MemoryQuotaLedger(limits, timezone=timezone)


def test_limits_are_read_only() -> None:
    source = {"chat_gen": 3}
    ledger = MemoryQuotaLedger(source)
    source["chat_gen"] = 100
    assert ledger.limits == {"chat_gen": 3}
    with pytest.raises(TypeError):
        ledger.limits["chat_gen"] = 5  # type: ignore[index]


def test_200_threads_on_a_budget_of_20_get_exactly_20(make_ledger: MakeLedger) -> None:
    ledger = make_ledger()
    start = threading.Barrier(200)
    results: list[SpendResult] = []
    results_lock = threading.Lock()

    def spend() -> None:
        start.wait()
        result = ledger.try_spend("rerank_calls")
        with results_lock:
            results.append(result)

    threads = [threading.Thread(target=spend) for _ in range(200)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 200
    assert sum(r.allowed for r in results) == 20
    assert {r.reason for r in results if not r.allowed} == {"quota"}
    assert sorted(r.remaining for r in results if r.allowed) == list(range(20))
    assert ledger.remaining("rerank_calls") == 0


async def test_200_tasks_on_a_budget_of_20_get_exactly_20(make_ledger: MakeLedger) -> None:
    ledger = make_ledger()
    results = await asyncio.gather(*(ledger.atry_spend("rerank_calls") for _ in range(200)))
    assert sum(r.allowed for r in results) == 20
    assert sorted(r.remaining for r in results if r.allowed) == list(range(20))
    assert await ledger.aremaining("rerank_calls") == 0
