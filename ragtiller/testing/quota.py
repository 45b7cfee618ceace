"""The quota ledger contract: atomic spends inside a daily window, refusals, and fail closed.

See :mod:`ragtiller.testing.stores` for how to subclass it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator, Mapping
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
from ragtiller.testing._stores import Opened

LedgerFactory = Callable[..., QuotaLedger]
"""What ``make_ledger`` returns: ``(limits, *, tenant_limits=None, timezone="UTC", clock=None)``
to a new ledger."""
LIMITS: Mapping[str, int] = {"chat_gen": 3, "rerank_calls": 20, "disabled": 0}
"""The budgets a contract ledger gets unless a test says otherwise."""
UNAVAILABLE = SpendResult(allowed=False, remaining=0, reason="quota-store-unavailable")


class ManualClock:
    """A wall clock that moves only when told."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


class QuotaLedgerContract:
    """The quota ledger contract as pytest tests; subclass it with a ``make_ledger`` fixture."""

    @pytest.fixture
    def make_ledger(self) -> LedgerFactory:
        """Override: return a function ``(limits, *, tenant_limits=None, timezone="UTC",
        clock=None)`` to a new ledger of yours over an empty store (ledgers made in one test may
        share it, or not)."""
        raise NotImplementedError("define a make_ledger fixture in your QuotaLedgerContract")

    @pytest.fixture
    def ledgers(self, make_ledger: LedgerFactory) -> Iterator[Opened[QuotaLedger]]:
        """Ledgers from ``make_ledger`` (most tests ask for :data:`LIMITS`), closed at teardown."""
        opened: Opened[QuotaLedger] = Opened(make_ledger, QuotaLedger)
        yield opened
        opened.close()

    def test_spend_remaining_refund(self, ledgers: Opened[QuotaLedger]) -> None:
        ledger = ledgers(LIMITS)

        async def main() -> None:
            assert await ledger.aremaining("chat_gen") == 3
            assert await ledger.atry_spend("chat_gen") == SpendResult(allowed=True, remaining=2)
            assert await ledger.atry_spend("chat_gen", 2) == SpendResult(allowed=True, remaining=0)
            assert await ledger.atry_spend("chat_gen") == SpendResult(False, 0, "quota")
            await ledger.arefund("chat_gen")
            assert await ledger.aremaining("chat_gen") == 1
            assert await ledger.atry_spend("chat_gen") == SpendResult(allowed=True, remaining=0)

        ledgers.run(main)

    def test_snapshot_reads_several_budgets_at_once(self, ledgers: Opened[QuotaLedger]) -> None:
        ledger = ledgers(LIMITS)

        async def main() -> None:
            assert ledger.available
            await ledger.atry_spend("chat_gen", 2)
            await ledger.atry_spend("rerank_calls", 5)
            reading = await ledger.asnapshot(["rerank_calls", "chat_gen", "rerank_calls"])
            assert reading == QuotaSnapshot({"rerank_calls": 15, "chat_gen": 1}, available=True)
            assert list(reading.remaining) == ["rerank_calls", "chat_gen"]
            everything = await ledger.asnapshot()
            assert everything == QuotaSnapshot(
                {"chat_gen": 1, "rerank_calls": 15, "disabled": 0}, available=True
            )
            assert await ledger.asnapshot([]) == QuotaSnapshot({}, available=True)
            with pytest.raises(UnknownResourceError, match="unknown quota resource 'chat'"):
                await ledger.asnapshot(["chat_gen", "chat"])

        ledgers.run(main)

    def test_refund_never_raises_the_budget_above_the_limit(
        self, ledgers: Opened[QuotaLedger]
    ) -> None:
        ledger = ledgers(LIMITS)

        async def main() -> None:
            await ledger.arefund("chat_gen", 5)
            assert await ledger.aremaining("chat_gen") == 3
            await ledger.atry_spend("chat_gen")
            await ledger.arefund("chat_gen", 5)
            assert await ledger.aremaining("chat_gen") == 3
            assert (await ledger.atry_spend("chat_gen", 4)).allowed is False

        ledgers.run(main)

    def test_limit_zero_refuses_every_spend(self, ledgers: Opened[QuotaLedger]) -> None:
        ledger = ledgers(LIMITS)

        async def main() -> None:
            assert ledger.limit("disabled") == 0
            assert await ledger.aremaining("disabled") == 0
            assert await ledger.atry_spend("disabled") == SpendResult(False, 0, "quota")

        ledgers.run(main)

    def test_a_spend_larger_than_the_rest_is_refused_whole(
        self, ledgers: Opened[QuotaLedger]
    ) -> None:
        ledger = ledgers({"chat_gen": 5})

        async def main() -> None:
            assert (await ledger.atry_spend("chat_gen", 3)).allowed
            assert await ledger.atry_spend("chat_gen", 3) == SpendResult(False, 2, "quota")
            assert await ledger.aremaining("chat_gen") == 2
            assert await ledger.atry_spend("chat_gen", 2) == SpendResult(True, 0)

        ledgers.run(main)

    def test_resources_have_separate_budgets(self, ledgers: Opened[QuotaLedger]) -> None:
        ledger = ledgers(LIMITS)

        async def main() -> None:
            assert (await ledger.atry_spend("chat_gen", 3)).allowed
            assert await ledger.aremaining("chat_gen") == 0
            assert await ledger.aremaining("rerank_calls") == 20
            assert await ledger.atry_spend("rerank_calls", 20) == SpendResult(True, 0)

        ledgers.run(main)

    def test_unknown_resource_is_a_clear_error(self, ledgers: Opened[QuotaLedger]) -> None:
        ledger = ledgers(LIMITS)
        message = (
            r"^unknown quota resource 'chat'; known resources: chat_gen, disabled, rerank_calls$"
        )
        with pytest.raises(UnknownResourceError, match=message) as caught:
            ledger.limit("chat")
        assert isinstance(caught.value, KeyError)
        assert isinstance(caught.value, RagtillerError)

        async def main() -> None:
            with pytest.raises(UnknownResourceError, match=message):
                await ledger.atry_spend("chat")
            with pytest.raises(UnknownResourceError, match=message):
                await ledger.arefund("chat")
            with pytest.raises(UnknownResourceError, match=message):
                await ledger.aremaining("chat")

        ledgers.run(main)

    @pytest.mark.parametrize("n", [0, -1, True, 1.5])
    def test_spend_and_refund_need_a_positive_int(
        self, ledgers: Opened[QuotaLedger], n: Any
    ) -> None:
        ledger = ledgers(LIMITS)

        async def main() -> None:
            with pytest.raises(ValueError, match=r"^n must be an int >= 1, but got"):
                await ledger.atry_spend("chat_gen", n)
            with pytest.raises(ValueError, match=r"^n must be an int >= 1, but got"):
                await ledger.arefund("chat_gen", n)
            assert await ledger.aremaining("chat_gen") == 3

        ledgers.run(main)

    def test_window_rolls_over_at_utc_midnight(self, ledgers: Opened[QuotaLedger]) -> None:
        clock = ManualClock(datetime(2026, 6, 16, 23, 59, 59, tzinfo=UTC))
        ledger = ledgers(LIMITS, clock=clock)

        async def main() -> None:
            assert (await ledger.atry_spend("chat_gen", 3)).allowed
            assert await ledger.atry_spend("chat_gen") == SpendResult(False, 0, "quota")
            clock.advance(seconds=1)
            assert ledger.window().id == "2026-06-17"
            assert await ledger.aremaining("chat_gen") == 3
            assert await ledger.atry_spend("chat_gen") == SpendResult(True, 2)

        ledgers.run(main)

    def test_window_is_the_calendar_day_of_the_timezone(self, ledgers: Opened[QuotaLedger]) -> None:
        # 04:30 UTC on 10 March is 23:30 on 9 March in New York: the New York day ends at 05:00.
        clock = ManualClock(datetime(2024, 3, 10, 4, 30, tzinfo=UTC))
        new_york = ledgers(LIMITS, clock=clock, timezone="America/New_York")
        utc = ledgers(LIMITS, clock=clock)

        async def main() -> None:
            assert new_york.window().id == "2024-03-09"
            assert (await new_york.atry_spend("chat_gen", 3)).allowed
            assert (await utc.atry_spend("rerank_calls", 20)).allowed
            clock.advance(minutes=30)
            assert new_york.window().id == "2024-03-10"
            assert await new_york.aremaining("chat_gen") == 3
            assert utc.window().id == "2024-03-10"
            assert await utc.aremaining("rerank_calls") == 0

        ledgers.run(main)

    def test_window_length_follows_daylight_saving_time(self, ledgers: Opened[QuotaLedger]) -> None:
        # New York springs forward on 10 March 2024: that local day lasts 23 hours.
        clock = ManualClock(datetime(2024, 3, 10, 5, 0, tzinfo=UTC))
        ledger = ledgers(LIMITS, timezone="America/New_York", clock=clock)
        assert ledger.window().id == "2024-03-10"
        assert ledger.window().seconds_left == 23 * 3600
        assert ledger.timezone == "America/New_York"

    def test_a_naive_clock_reads_as_utc(self, ledgers: Opened[QuotaLedger]) -> None:
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
        ledgers: Opened[QuotaLedger],
        limits: dict[str, Any],
        timezone: str,
        message: str,
    ) -> None:
        with pytest.raises(ConfigurationError, match=message):
            ledgers(limits, timezone=timezone)

    def test_limits_are_read_only(self, ledgers: Opened[QuotaLedger]) -> None:
        source = {"chat_gen": 3}
        ledger = ledgers(source)
        source["chat_gen"] = 100
        assert ledger.limits == {"chat_gen": 3}
        with pytest.raises(TypeError):
            ledger.limits["chat_gen"] = 5  # type: ignore[index]

    def test_200_tasks_on_a_budget_of_20_get_exactly_20(self, ledgers: Opened[QuotaLedger]) -> None:
        ledger = ledgers(LIMITS)

        async def main() -> None:
            results = await asyncio.gather(*(ledger.atry_spend("rerank_calls") for _ in range(200)))
            assert sum(r.allowed for r in results) == 20
            assert sorted(r.remaining for r in results if r.allowed) == list(range(20))
            assert await ledger.aremaining("rerank_calls") == 0

        ledgers.run(main)

    def test_a_tenant_spends_from_its_own_budget_and_the_shared_one(
        self, ledgers: Opened[QuotaLedger]
    ) -> None:
        ledger = ledgers({"chat_gen": 6}, tenant_limits={"chat_gen": 2})
        own = SpendResult(allowed=True, remaining=1, budget="tenant")

        async def main() -> None:
            assert await ledger.atry_spend("chat_gen", tenant="acme") == own
            assert await ledger.atry_spend("chat_gen", tenant="acme") == SpendResult(
                True, 0, budget="tenant"
            )
            assert await ledger.atry_spend("chat_gen", tenant="acme") == SpendResult(
                False, 0, "quota", "tenant"
            )
            assert await ledger.aremaining("chat_gen") == 4  # the refusal spent neither
            for other in ("globex", "acme:x", "ACME"):  # a budget of its own, however named
                assert await ledger.atry_spend("chat_gen", tenant=other) == own
            assert await ledger.atry_spend("chat_gen") == SpendResult(True, 0)  # shared only
            assert await ledger.atry_spend("chat_gen", tenant="initech") == SpendResult(
                False, 0, "quota", "shared"
            )
            assert await ledger.asnapshot(["chat_gen"], tenant="globex") == QuotaSnapshot(
                {"chat_gen": 0}, True, {"chat_gen": 1}
            )
            await ledger.arefund("chat_gen", tenant="acme")
            assert await ledger.asnapshot(tenant="acme") == QuotaSnapshot(
                {"chat_gen": 1}, True, {"chat_gen": 1}
            )
            assert await ledger.aremaining("chat_gen", tenant="globex") == 1
            assert await ledger.atry_spend("chat_gen", tenant="globex") == SpendResult(
                True, 0, budget="tenant"
            )

        ledgers.run(main)

    def test_a_per_tenant_cap_holds_where_the_ledger_has_none(
        self, ledgers: Opened[QuotaLedger]
    ) -> None:
        ledger = ledgers(LIMITS)

        async def main() -> None:
            with spend_caps({}, {"chat_gen": 1}):
                assert await ledger.atry_spend("chat_gen", tenant="acme") == SpendResult(
                    True, 0, budget="tenant"
                )
                assert await ledger.atry_spend("chat_gen", tenant="acme") == SpendResult(
                    False, 0, "quota", "tenant"
                )
                assert (await ledger.asnapshot(tenant="acme")).tenant_remaining == {"chat_gen": 0}
            assert await ledger.atry_spend("chat_gen", tenant="acme") == SpendResult(True, 1)

        ledgers.run(main)

    def test_200_tasks_of_4_tenants_keep_both_budgets(self, ledgers: Opened[QuotaLedger]) -> None:
        ledger = ledgers({"chat_gen": 30}, tenant_limits={"chat_gen": 10})
        tenants = ["acme", "globex", "initech", "umbrella"]

        async def main() -> None:
            spends = [ledger.atry_spend("chat_gen", tenant=tenants[i % 4]) for i in range(200)]
            results = await asyncio.gather(*spends)
            allowed = [tenants[i % 4] for i, r in enumerate(results) if r.allowed]
            assert len(allowed) == 30
            assert max(allowed.count(t) for t in tenants) <= 10
            assert await ledger.aremaining("chat_gen") == 0

        ledgers.run(main)


class QuotaLedgerOutageContract:
    """A ledger whose store does not answer fails closed, logged, and never raises; subclass
    it with a ``make_unreachable_ledger`` fixture."""

    @pytest.fixture
    def make_unreachable_ledger(self) -> LedgerFactory:
        """Override: as ``make_ledger``, but over a store that does not answer."""
        raise NotImplementedError(
            "define a make_unreachable_ledger fixture in your QuotaLedgerOutageContract"
        )

    @pytest.fixture
    def unreachable_ledgers(
        self, make_unreachable_ledger: LedgerFactory
    ) -> Iterator[Opened[QuotaLedger]]:
        """Ledgers from ``make_unreachable_ledger``, closed at teardown."""
        opened: Opened[QuotaLedger] = Opened(make_unreachable_ledger, QuotaLedger)
        yield opened
        opened.close()

    def test_an_unreachable_store_fails_closed_and_never_raises(
        self, unreachable_ledgers: Opened[QuotaLedger], caplog: pytest.LogCaptureFixture
    ) -> None:
        ledger = unreachable_ledgers(LIMITS)

        async def main() -> None:
            assert await ledger.atry_spend("chat_gen") == UNAVAILABLE
            assert await ledger.aremaining("chat_gen") == 0
            await ledger.arefund("chat_gen")
            closed = QuotaSnapshot({"chat_gen": 0, "rerank_calls": 0}, available=False)
            assert await ledger.asnapshot(["chat_gen", "rerank_calls"]) == closed

        with caplog.at_level(logging.WARNING, logger="ragtiller.stores"):
            unreachable_ledgers.run(main)
        messages = [r.getMessage() for r in caplog.records if r.name == "ragtiller.stores"]
        assert any("refusing 1 chat_gen (fail closed)" in m for m in messages)
        assert any("refund of 1 chat_gen lost" in m for m in messages)

    def test_bad_calls_are_still_errors_when_the_store_is_down(
        self, unreachable_ledgers: Opened[QuotaLedger]
    ) -> None:
        ledger = unreachable_ledgers(LIMITS)
        with pytest.raises(UnknownResourceError, match="unknown quota resource 'chat'"):
            asyncio.run(ledger.atry_spend("chat"))
        with pytest.raises(ValueError, match=r"^n must be an int >= 1, but got 0"):
            asyncio.run(ledger.atry_spend("chat_gen", 0))
