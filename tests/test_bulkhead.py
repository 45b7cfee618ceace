"""The bulkhead's pool: admission within deadlines, abandonment, recovery, one pool per provider."""

from __future__ import annotations

import asyncio
import math
import threading
import time
import weakref
from dataclasses import dataclass

import pytest

from ragtiller.core.bulkhead import (
    Bulkhead,
    DeadlineExceeded,
    Overloaded,
    ProviderHung,
    bulkhead_for,
    call_time_left,
    throttled,
    time_left,
    within,
)


def threads_named(prefix: str) -> int:
    return sum(1 for t in threading.enumerate() if t.name.startswith(prefix))


def test_calls_one_after_another_reuse_one_worker() -> None:
    pool = Bulkhead("reuse", workers=4)

    async def calls() -> list[int]:
        return [await pool.call(abs, -n, timeout_s=5) for n in range(50)]

    assert asyncio.run(calls()) == list(range(50))
    assert threads_named("ragtiller-reuse-") == 1
    assert pool.busy == 0


def test_calls_at_once_run_in_parallel_up_to_the_bound() -> None:
    pool = Bulkhead("parallel", workers=3)
    barrier = threading.Barrier(3, timeout=5)  # breaks unless three calls run at the same time

    async def calls() -> list[int]:
        return await asyncio.gather(*(pool.call(barrier.wait, timeout_s=5) for _ in range(3)))

    assert sorted(asyncio.run(calls())) == [0, 1, 2]
    assert threads_named("ragtiller-parallel-") == 3


def test_queued_calls_run_when_a_worker_frees_up() -> None:
    pool = Bulkhead("queued", workers=1, queue=8)
    order: list[int] = []

    async def calls() -> None:
        await asyncio.gather(*(pool.call(order.append, n, timeout_s=5) for n in range(6)))

    asyncio.run(calls())
    assert order == list(range(6))
    assert threads_named("ragtiller-queued-") == 1


# --- admission: a healthy provider's calls wait for a worker, they are never shed -------------


def test_calls_past_the_bound_wait_for_a_worker_instead_of_failing() -> None:
    pool = Bulkhead("admit", workers=2)

    async def calls() -> list[int]:
        def slow(n: int) -> int:
            time.sleep(0.02)
            return n

        return await asyncio.gather(*(pool.call(slow, n, timeout_s=5) for n in range(40)))

    assert sorted(asyncio.run(calls())) == list(range(40))
    assert threads_named("ragtiller-admit-") == 2


def test_a_call_that_never_got_a_worker_is_overloaded_and_the_provider_not_blamed() -> None:
    pool = Bulkhead("saturated", workers=1)
    release = threading.Event()

    async def scenario() -> None:
        busy = asyncio.ensure_future(pool.call(release.wait, 5, timeout_s=5))
        await asyncio.sleep(0.05)
        with pytest.raises(Overloaded, match="no worker came free"):
            await pool.call(sum, [1], timeout_s=0.1)
        release.set()
        assert await busy is True

    asyncio.run(scenario())
    assert pool.breaker.snapshot().consecutive_failures == 0


def test_a_call_that_waited_longer_than_it_ran_is_overloaded_too() -> None:
    pool = Bulkhead("late", workers=1)

    async def scenario() -> None:
        first = asyncio.ensure_future(pool.call(time.sleep, 0.3, timeout_s=5))
        await asyncio.sleep(0.01)
        with pytest.raises(Overloaded):  # waits ~0.3 s, then runs ~0.1 s of its 0.3 s sleep
            await pool.call(time.sleep, 0.3, timeout_s=0.4)
        await first

    asyncio.run(scenario())
    assert pool.breaker.snapshot().consecutive_failures == 0


def test_a_call_cut_because_it_waited_is_overloaded_even_if_it_ran_longer_than_it_waited() -> None:
    # The auditor's D1: a healthy 0.6 s call under a 0.7 s deadline waits ~0.2 s for the one
    # worker, then runs ~0.5 s when the deadline cuts it. It never had its whole 0.7 s.
    pool = Bulkhead("cut-late", workers=1)

    async def scenario() -> None:
        first = asyncio.ensure_future(pool.call(time.sleep, 0.2, timeout_s=5))
        await asyncio.sleep(0.01)
        with pytest.raises(Overloaded):
            await pool.call(time.sleep, 0.6, timeout_s=0.7)
        await first

    asyncio.run(scenario())
    assert pool.breaker.snapshot().state == "closed"
    assert pool.breaker.snapshot().consecutive_failures == 0


def test_a_call_that_got_a_worker_at_once_and_hung_is_still_a_timeout() -> None:
    pool = Bulkhead("hangs", workers=2, hung_after=2)
    release = threading.Event()

    async def scenario() -> None:
        for _ in range(2):
            with pytest.raises(DeadlineExceeded):
                await pool.call(release.wait, 5, timeout_s=0.1)

    try:
        asyncio.run(scenario())
        assert pool.breaker.snapshot().state == "open"
    finally:
        release.set()


def test_a_call_cut_because_its_own_throttle_made_it_wait_is_overloaded() -> None:
    # A provider's client-side throttle (a semaphore, a rate limit) waits on the worker; that
    # wait, like one for a worker, is not the provider running.
    pool = Bulkhead("throttle", workers=2, hung_after=1)

    def throttled_then_slow() -> None:
        with throttled():
            time.sleep(min(0.4, call_time_left()))
        time.sleep(0.4)

    async def scenario() -> None:
        with pytest.raises(Overloaded):
            await pool.call(throttled_then_slow, timeout_s=0.6)

    asyncio.run(scenario())
    assert pool.breaker.snapshot().state == "closed"
    assert call_time_left() == math.inf  # not on a worker


def test_overloaded_raised_by_a_providers_own_throttle_is_no_verdict() -> None:
    pool = Bulkhead("gave-up", workers=1, hung_after=1, probe_after_s=0.2)
    left: list[float] = []

    def refuse() -> None:
        left.append(call_time_left())
        raise Overloaded("throttled past the deadline")

    async def scenario() -> None:
        with pytest.raises(DeadlineExceeded):  # a hang opens the breaker...
            await pool.call(time.sleep, 0.3, timeout_s=0.05)
        await asyncio.sleep(pool.breaker.reset_after_s + 0.05)
        with pytest.raises(Overloaded):  # ...and a probe that was throttled decides nothing
            await pool.call(refuse, timeout_s=2)

    asyncio.run(scenario())
    assert 0 < left[0] <= 2
    assert pool.breaker.snapshot().state == "half-open"


def test_within_says_overloaded_when_its_work_waited_for_a_worker() -> None:
    pool = Bulkhead("ambient", workers=1)
    release = threading.Event()

    async def scenario() -> None:
        busy = asyncio.ensure_future(pool.call(release.wait, 5, timeout_s=5))
        await asyncio.sleep(0.05)
        with pytest.raises(Overloaded):
            await within(pool.call(sum, [1], timeout_s=60), 0.1)  # cut to the enclosing 0.1 s
        release.set()
        await busy

    asyncio.run(scenario())


def test_time_left_is_the_innermost_enclosing_deadline() -> None:
    async def scenario() -> tuple[float, float, float]:
        async def inner() -> tuple[float, float]:
            return time_left(), await within(asyncio.sleep(0, time_left()), 60)

        outside = time_left()
        seen, nested = await within(inner(), 2.0)
        return outside, seen, nested

    outside, seen, nested = asyncio.run(scenario())
    assert outside == math.inf
    assert 1.5 < seen <= 2.0 and 1.5 < nested <= 2.0  # an inner 60 s never outlasts the 2 s


def test_idle_workers_end_after_a_burst() -> None:
    pool = Bulkhead("burst", workers=4, idle_s=0.05)
    barrier = threading.Barrier(4, timeout=5)

    async def burst() -> None:
        await asyncio.gather(*(pool.call(barrier.wait, timeout_s=5) for _ in range(4)))

    asyncio.run(burst())
    assert pool.threads == 4
    deadline = time.monotonic() + 5
    while pool.threads and time.monotonic() < deadline:
        time.sleep(0.02)
    assert pool.threads == 0 and threads_named("ragtiller-burst-") == 0
    assert asyncio.run(pool.call(abs, -3, timeout_s=5)) == 3  # and a new call starts one again


# --- abandonment and recovery: a hung call costs its thread, not the pool ---------------------


def test_an_abandoned_call_leaves_its_worker_slot_to_the_next_call() -> None:
    pool = Bulkhead("abandon", workers=1, spare=2)
    release = threading.Event()

    async def scenario() -> int:
        with pytest.raises(DeadlineExceeded):
            await pool.call(release.wait, 60, timeout_s=0.05)
        return await pool.call(abs, -7, timeout_s=1)

    try:
        assert asyncio.run(scenario()) == 7
        assert (pool.abandoned, pool.threads) == (1, 2)
    finally:
        release.set()
    deadline = time.monotonic() + 5
    while pool.abandoned and time.monotonic() < deadline:
        time.sleep(0.01)
    assert pool.abandoned == 0  # the hung call returned: its thread serves again


def test_hung_calls_open_the_breaker_and_a_probe_that_answers_closes_it() -> None:
    pool = Bulkhead("probe", workers=4, hung_after=3, probe_after_s=0.2)
    healthy = threading.Event()
    release = threading.Event()

    def provider() -> str:
        if not healthy.is_set():
            release.wait(60)
        return "ok"

    async def scenario() -> None:
        for _ in range(3):
            with pytest.raises(DeadlineExceeded):
                await pool.call(provider, timeout_s=0.05)
        started = time.perf_counter()
        with pytest.raises(ProviderHung, match="3 calls in a row outlived their deadline"):
            await pool.call(provider, timeout_s=5)
        assert time.perf_counter() - started < 0.05  # refused at once, no thread spent
        assert pool.breaker.snapshot().state == "open"
        healthy.set()  # the provider recovers; its three hung calls never return
        await asyncio.sleep(0.25)
        assert await pool.call(provider, timeout_s=1) == "ok"  # the probe
        assert pool.breaker.snapshot().state == "closed"
        assert (
            await asyncio.gather(*(pool.call(provider, timeout_s=1) for _ in range(8)))
            == ["ok"] * 8
        )

    try:
        asyncio.run(scenario())
        assert pool.abandoned == 3
    finally:
        release.set()


def test_a_probe_that_hangs_opens_the_breaker_again() -> None:
    pool = Bulkhead("reprobe", workers=2, hung_after=1, probe_after_s=0.1)
    release = threading.Event()

    async def scenario() -> None:
        with pytest.raises(DeadlineExceeded):
            await pool.call(release.wait, 60, timeout_s=0.05)
        with pytest.raises(ProviderHung):
            await pool.call(release.wait, 60, timeout_s=0.05)
        await asyncio.sleep(0.15)
        with pytest.raises(DeadlineExceeded):  # the probe, hung too
            await pool.call(release.wait, 60, timeout_s=0.05)
        with pytest.raises(ProviderHung):
            await pool.call(release.wait, 60, timeout_s=0.05)

    try:
        asyncio.run(scenario())
    finally:
        release.set()


def test_a_caller_cancelled_for_another_reason_gives_no_verdict() -> None:
    pool = Bulkhead("cancelled", workers=2, hung_after=1)
    release = threading.Event()

    async def scenario() -> None:
        call = asyncio.ensure_future(pool.call(release.wait, 60, timeout_s=30))
        await asyncio.sleep(0.05)
        call.cancel()  # say, the client went away
        with pytest.raises(asyncio.CancelledError):
            await call

    try:
        asyncio.run(scenario())
        assert pool.breaker.snapshot().state == "closed"
        assert pool.abandoned == 1
    finally:
        release.set()


def test_threads_stay_bounded_however_many_calls_hang() -> None:
    pool = Bulkhead("bounded", workers=3, spare=2, probe_after_s=0.01)
    release = threading.Event()
    outcomes: set[type[BaseException]] = set()

    async def scenario() -> int:
        most = 0
        for _ in range(100):
            calls = [pool.call(release.wait, 60, timeout_s=0.01) for _ in range(10)]
            for result in await asyncio.gather(*calls, return_exceptions=True):
                assert isinstance(result, DeadlineExceeded | Overloaded | ProviderHung)
                outcomes.add(type(result))
            most = max(most, threads_named("ragtiller-bounded-"))
        return most

    try:
        assert asyncio.run(scenario()) <= 3 + 2  # workers + spare, over 1,000 hung calls
        assert outcomes == {DeadlineExceeded, Overloaded, ProviderHung}
    finally:
        release.set()


# --- one bulkhead per provider, by identity ----------------------------------------------------


@dataclass(slots=True)
class SlottedProvider:
    """Cannot be weakly referenced (``__slots__`` without ``__weakref__``)."""

    name: str


def test_a_provider_that_cannot_be_weakly_referenced_keeps_one_bulkhead() -> None:
    provider = SlottedProvider("slotted")
    with pytest.raises(TypeError):
        weakref.ref(provider)
    pool = bulkhead_for(provider, "slotted")
    assert bulkhead_for(provider, "slotted") is pool
    assert bulkhead_for(SlottedProvider("slotted"), "slotted") is not pool  # another instance


def test_settings_apply_to_the_pool_made_by_the_first_call() -> None:
    provider = SlottedProvider("configured")
    pool = bulkhead_for(provider, "configured", workers=2, probe_after_s=0.5)
    assert (pool.workers, pool.breaker.reset_after_s) == (2, 0.5)
    assert bulkhead_for(provider, "configured", workers=9) is pool
