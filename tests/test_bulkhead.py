"""The bulkhead's pool: idle workers are reused, busy ones add workers up to the bound."""

from __future__ import annotations

import asyncio
import threading

from ragtiller.bulkhead import Bulkhead


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
