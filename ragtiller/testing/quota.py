"""The quota ledger contract: atomic spends inside a daily window, refusals, and fail closed."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from ragtiller.errors import ConfigurationError, RagtillerError
from ragtiller.stores import (
    QuotaLedger,
    QuotaSnapshot,
    SpendResult,
    UnknownResourceError,
    spend_caps,
)
from ragtiller.testing._fixtures import Opened, in_loop, opened, required

LedgerFactory = Callable[..., QuotaLedger]
"""What ``make_ledger`` returns: ``(limits, *, tenant_limits=None, timezone="UTC", clock=None)``
to a new ledger."""
Ledgers = Opened[QuotaLedger]  # ``ledgers(limits, **options)`` opens one more
LIMITS: Mapping[str, int] = {"chat_gen": 3, "rerank_calls": 20, "disabled": 0}
UNAVAILABLE = SpendResult(allowed=False, remaining=0, reason="quota-store-unavailable")
SPENT = SpendResult(False, 0, "quota")
OWN_SPENT = SpendResult(False, 0, "quota", "tenant")


def own(left: int) -> SpendResult:
    """A spend granted from a tenant's own budget, ``left`` of it left."""
    return SpendResult(True, left, budget="tenant")


class QuotaLedgerContract:
    """The quota ledger contract as pytest tests; subclass it with a ``make_ledger`` fixture."""

    make_ledger = required("make_ledger", "QuotaLedgerContract")
    ledgers = opened("make_ledger", QuotaLedger)

    @in_loop
    async def test_spend_remaining_refund(self, ledgers: Ledgers) -> None:
        ledger = ledgers(LIMITS)
        assert await ledger.aremaining("chat_gen") == 3
        assert await ledger.atry_spend("chat_gen") == SpendResult(allowed=True, remaining=2)
        assert await ledger.atry_spend("chat_gen", 2) == SpendResult(allowed=True, remaining=0)
        assert await ledger.atry_spend("chat_gen") == SPENT
        await ledger.arefund("chat_gen")
        assert await ledger.aremaining("chat_gen") == 1
        assert await ledger.atry_spend("chat_gen") == SpendResult(allowed=True, remaining=0)

    @in_loop
    async def test_snapshot_reads_several_budgets_at_once(self, ledgers: Ledgers) -> None:
        ledger = ledgers(LIMITS)
        assert ledger.available
        await ledger.atry_spend("chat_gen", 2)
        await ledger.atry_spend("rerank_calls", 5)
        reading = await ledger.asnapshot(["rerank_calls", "chat_gen", "rerank_calls"])
        assert reading == QuotaSnapshot({"rerank_calls": 15, "chat_gen": 1}, available=True)
        assert list(reading.remaining) == ["rerank_calls", "chat_gen"]
        everything = await ledger.asnapshot()
        assert everything == QuotaSnapshot({"chat_gen": 1, "rerank_calls": 15, "disabled": 0}, True)
        assert await ledger.asnapshot([]) == QuotaSnapshot({}, available=True)
        with pytest.raises(UnknownResourceError, match="unknown quota resource 'chat'"):
            await ledger.asnapshot(["chat_gen", "chat"])

    @in_loop
    async def test_refund_never_raises_the_budget_above_the_limit(self, ledgers: Ledgers) -> None:
        ledger = ledgers(LIMITS)
        await ledger.arefund("chat_gen", 5)
        assert await ledger.aremaining("chat_gen") == 3
        await ledger.atry_spend("chat_gen")
        await ledger.arefund("chat_gen", 5)
        assert await ledger.aremaining("chat_gen") == 3
        assert (await ledger.atry_spend("chat_gen", 4)).allowed is False

    @in_loop
    async def test_limit_zero_refuses_every_spend(self, ledgers: Ledgers) -> None:
        ledger = ledgers(LIMITS)
        assert ledger.limit("disabled") == 0
        assert await ledger.aremaining("disabled") == 0
        assert await ledger.atry_spend("disabled") == SPENT

    @in_loop
    async def test_a_spend_larger_than_the_rest_is_refused_whole(self, ledgers: Ledgers) -> None:
        ledger = ledgers({"chat_gen": 5})
        assert (await ledger.atry_spend("chat_gen", 3)).allowed
        assert await ledger.atry_spend("chat_gen", 3) == SpendResult(False, 2, "quota")
        assert await ledger.aremaining("chat_gen") == 2
        assert await ledger.atry_spend("chat_gen", 2) == SpendResult(True, 0)

    @in_loop
    async def test_resources_have_separate_budgets(self, ledgers: Ledgers) -> None:
        ledger = ledgers(LIMITS)
        assert (await ledger.atry_spend("chat_gen", 3)).allowed
        assert await ledger.aremaining("chat_gen") == 0
        assert await ledger.aremaining("rerank_calls") == 20
        assert await ledger.atry_spend("rerank_calls", 20) == SpendResult(True, 0)

    @in_loop
    async def test_a_tenant_spends_from_its_own_budget_and_the_shared_one(
        self, ledgers: Ledgers
    ) -> None:
        ledger = ledgers({"chat_gen": 6}, tenant_limits={"chat_gen": 2})
        spends = [await ledger.atry_spend("chat_gen", tenant="acme") for _ in range(3)]
        assert spends == [own(1), own(0), OWN_SPENT]
        assert await ledger.aremaining("chat_gen") == 4  # the refusal spent neither
        for other in ("globex", "acme:x", "ACME"):  # a budget of its own, however named
            assert await ledger.atry_spend("chat_gen", tenant=other) == own(1)
        assert await ledger.atry_spend("chat_gen") == SpendResult(True, 0)  # shared only
        assert await ledger.atry_spend("chat_gen", tenant="initech") == SPENT
        globex = await ledger.asnapshot(["chat_gen"], tenant="globex")
        assert globex == QuotaSnapshot({"chat_gen": 0}, True, {"chat_gen": 1})
        await ledger.arefund("chat_gen", tenant="acme")
        acme = await ledger.asnapshot(tenant="acme")
        assert acme == QuotaSnapshot({"chat_gen": 1}, True, {"chat_gen": 1})
        assert await ledger.aremaining("chat_gen", tenant="globex") == 1
        assert await ledger.atry_spend("chat_gen", tenant="globex") == own(0)

    @in_loop
    async def test_a_per_tenant_cap_holds_where_the_ledger_has_none(self, ledgers: Ledgers) -> None:
        ledger = ledgers(LIMITS)
        with spend_caps({}, {"chat_gen": 1}):
            assert await ledger.atry_spend("chat_gen", tenant="acme") == own(0)
            assert await ledger.atry_spend("chat_gen", tenant="acme") == OWN_SPENT
            assert (await ledger.asnapshot(tenant="acme")).tenant_remaining == {"chat_gen": 0}
        assert await ledger.atry_spend("chat_gen", tenant="acme") == SpendResult(True, 1)

    @in_loop
    async def test_unknown_resource_is_a_clear_error(self, ledgers: Ledgers) -> None:
        ledger = ledgers(LIMITS)
        message = (
            r"^unknown quota resource 'chat'; known resources: chat_gen, disabled, rerank_calls$"
        )
        with pytest.raises(UnknownResourceError, match=message) as caught:
            ledger.limit("chat")
        assert isinstance(caught.value, KeyError)
        assert isinstance(caught.value, RagtillerError)
        for call in (ledger.atry_spend, ledger.arefund, ledger.aremaining):
            with pytest.raises(UnknownResourceError, match=message):
                await call("chat")

    @pytest.mark.parametrize("n", [0, -1, True, 1.5])
    @in_loop
    async def test_spend_and_refund_need_a_positive_int(self, ledgers: Ledgers, n: Any) -> None:
        ledger = ledgers(LIMITS)
        for call in (ledger.atry_spend, ledger.arefund):
            with pytest.raises(ValueError, match=r"^n must be an int >= 1, but got"):
                await call("chat_gen", n)
        assert await ledger.aremaining("chat_gen") == 3

    @in_loop
    async def test_window_rolls_over_at_utc_midnight(self, ledgers: Ledgers) -> None:
        now = [datetime(2026, 6, 16, 23, 59, 59, tzinfo=UTC)]  # a clock that moves when told
        ledger = ledgers(LIMITS, clock=lambda: now[0])
        assert (await ledger.atry_spend("chat_gen", 3)).allowed
        assert await ledger.atry_spend("chat_gen") == SPENT
        now[0] += timedelta(seconds=1)
        assert ledger.window().id == "2026-06-17"
        assert await ledger.aremaining("chat_gen") == 3
        assert await ledger.atry_spend("chat_gen") == SpendResult(True, 2)

    @in_loop
    async def test_window_is_the_calendar_day_of_the_timezone(self, ledgers: Ledgers) -> None:
        # 04:30 UTC on 10 March is 23:30 on 9 March in New York: the New York day ends at 05:00.
        now = [datetime(2024, 3, 10, 4, 30, tzinfo=UTC)]
        new_york = ledgers(LIMITS, clock=lambda: now[0], timezone="America/New_York")
        utc = ledgers(LIMITS, clock=lambda: now[0])
        assert new_york.window().id == "2024-03-09"
        assert (await new_york.atry_spend("chat_gen", 3)).allowed
        assert (await utc.atry_spend("rerank_calls", 20)).allowed
        now[0] += timedelta(minutes=30)
        assert new_york.window().id == "2024-03-10"
        assert await new_york.aremaining("chat_gen") == 3
        assert utc.window().id == "2024-03-10"
        assert await utc.aremaining("rerank_calls") == 0

    def test_window_length_follows_daylight_saving_time(self, ledgers: Ledgers) -> None:
        # New York springs forward on 10 March 2024: that local day lasts 23 hours.
        ledger = ledgers(
            LIMITS, timezone="America/New_York", clock=lambda: datetime(2024, 3, 10, 5, tzinfo=UTC)
        )
        assert ledger.window().id == "2024-03-10"
        assert ledger.window().seconds_left == 23 * 3600
        assert ledger.timezone == "America/New_York"

    def test_a_naive_clock_reads_as_utc(self, ledgers: Ledgers) -> None:
        ledger = ledgers(LIMITS, clock=lambda: datetime(2026, 1, 1, 23, 0))
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
    def test_bad_configuration_is_rejected(
        self,
        ledgers: Ledgers,
        limits: dict[str, Any],
        timezone: str,
        message: str,
    ) -> None:
        with pytest.raises(ConfigurationError, match=message):
            ledgers(limits, timezone=timezone)
        with pytest.raises(ConfigurationError, match=message):
            ledgers({"chat_gen": 1}, tenant_limits=limits, timezone=timezone)

    def test_limits_are_read_only(self, ledgers: Ledgers) -> None:
        source = {"chat_gen": 3}
        ledger = ledgers(source)
        source["chat_gen"] = 100
        assert ledger.limits == {"chat_gen": 3}
        with pytest.raises(TypeError):
            ledger.limits["chat_gen"] = 5  # type: ignore[index]

    @in_loop
    async def test_200_tasks_on_a_budget_of_20_get_exactly_20(self, ledgers: Ledgers) -> None:
        ledger = ledgers(LIMITS)
        results = await asyncio.gather(*(ledger.atry_spend("rerank_calls") for _ in range(200)))
        assert sum(r.allowed for r in results) == 20
        assert sorted(r.remaining for r in results if r.allowed) == list(range(20))
        assert await ledger.aremaining("rerank_calls") == 0

    @in_loop
    async def test_200_tasks_of_4_tenants_keep_both_budgets(self, ledgers: Ledgers) -> None:
        ledger = ledgers({"chat_gen": 30}, tenant_limits={"chat_gen": 10})
        tenants = ["acme", "globex", "initech", "umbrella"] * 50
        spends = [ledger.atry_spend("chat_gen", tenant=tenant) for tenant in tenants]
        results = await asyncio.gather(*spends)
        allowed = [tenant for tenant, r in zip(tenants, results, strict=True) if r.allowed]
        assert len(allowed) == 30 and max(map(allowed.count, set(tenants))) <= 10
        assert await ledger.aremaining("chat_gen") == 0


class QuotaLedgerOutageContract:
    """A ledger whose store does not answer fails closed, logged, and never raises."""

    make_unreachable_ledger = required("make_unreachable_ledger", "QuotaLedgerOutageContract")
    unreachable_ledgers = opened("make_unreachable_ledger", QuotaLedger)

    @in_loop
    async def test_an_unreachable_store_fails_closed_and_never_raises(
        self, unreachable_ledgers: Ledgers, caplog: pytest.LogCaptureFixture
    ) -> None:
        ledger = unreachable_ledgers(LIMITS)
        with caplog.at_level(logging.WARNING, logger="ragtiller.stores"):
            assert await ledger.atry_spend("chat_gen") == UNAVAILABLE
            assert await ledger.atry_spend("chat_gen", tenant="acme") == UNAVAILABLE
            assert await ledger.aremaining("chat_gen") == 0
            await ledger.arefund("chat_gen")
            closed = QuotaSnapshot({"chat_gen": 0, "rerank_calls": 0}, available=False)
            assert await ledger.asnapshot(["chat_gen", "rerank_calls"]) == closed
        messages = [r.getMessage() for r in caplog.records if r.name == "ragtiller.stores"]
        assert any("refusing 1 chat_gen (fail closed)" in m for m in messages)
        assert any("refund of 1 chat_gen lost" in m for m in messages)

    def test_bad_calls_are_still_errors_when_the_store_is_down(
        self, unreachable_ledgers: Ledgers
    ) -> None:
        ledger = unreachable_ledgers(LIMITS)
        with pytest.raises(UnknownResourceError, match="unknown quota resource 'chat'"):
            asyncio.run(ledger.atry_spend("chat"))
        with pytest.raises(ValueError, match=r"^n must be an int >= 1, but got 0"):
            asyncio.run(ledger.atry_spend("chat_gen", 0))
