"""What a frozen Redis costs a run of turns, before and after the breaker, side by side in one run.

Run on demand (not in CI):  python benchmarks/bench_redis_outage.py [--calls 20]

A throwaway ``redis-server`` is started on a loopback port and frozen with SIGSTOP; each
configuration then makes ``--calls`` quota spends, as that many narrow turns would (one spend or
quota read each). Rows:

* previous settings: one 0.5 s connect/read timeout, a timeout retried once, no breaker;
* timeouts only: 0.25 s timeouts, a timeout not retried, a breaker that never opens;
* now: 0.25 s timeouts and the default breaker (3 failures, 5 s).

It also measures what the breaker adds to a healthy call (``admit`` + ``succeeded``) next to
the loopback round trip it guards, and how long service takes to come back after SIGCONT.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import redis.asyncio
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from fixtures.redis_server import RedisServer

from ragtiller.stores import CircuitBreaker, RedisQuotaLedger

BUDGET = {"chat_gen": 10**15}
NEVER_OPENS = 10**9


def previous_client(url: str) -> redis.asyncio.Redis:
    """A client built as the stores built theirs before the breaker: 0.5 s, timeouts retried."""
    pool = redis.asyncio.BlockingConnectionPool.from_url(
        url,
        retry=Retry(NoBackoff(), 1),
        max_connections=50,
        timeout=5.0,
        socket_connect_timeout=0.5,
        socket_timeout=0.5,
    )
    return redis.asyncio.Redis.from_pool(pool)


async def frozen_costs(ledger: RedisQuotaLedger, calls: int) -> list[float]:
    """Seconds taken by each of ``calls`` spends against the frozen server."""
    costs = []
    for _ in range(calls):
        began = time.perf_counter()
        result = await ledger.atry_spend("chat_gen")
        costs.append(time.perf_counter() - began)
        assert result.reason == "quota-store-unavailable", result
    return costs


def breaker_pair_ns(rounds: int = 200_000) -> float:
    """Nanoseconds per ``admit()`` + ``succeeded()`` on a closed breaker."""
    breaker = CircuitBreaker()
    began = time.perf_counter_ns()
    for _ in range(rounds):
        breaker.admit()
        breaker.succeeded()
    return (time.perf_counter_ns() - began) / rounds


async def healthy_spend_us(ledger: RedisQuotaLedger, rounds: int = 2_000) -> float:
    """Median microseconds of one spend against the healthy server."""
    samples = []
    for _ in range(rounds):
        began = time.perf_counter_ns()
        await ledger.atry_spend("chat_gen")
        samples.append((time.perf_counter_ns() - began) / 1000)
    return statistics.median(samples)


async def recovery_s(server: RedisServer, ledger: RedisQuotaLedger) -> float:
    """Seconds from SIGCONT until a spend is allowed again (polling every 10 ms)."""
    server.thaw()
    began = time.perf_counter()
    while not (await ledger.atry_spend("chat_gen")).allowed:
        await asyncio.sleep(0.01)
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20, help="spends per configuration")
    args = parser.parse_args()
    asyncio.run(run(args.calls))


async def run(calls: int) -> None:
    with tempfile.TemporaryDirectory() as workdir:
        server = RedisServer("redis-server", Path(workdir))
        server.start()
        url, prefix = server.url, f"bench:{os.getpid()}:"
        previous = RedisQuotaLedger(
            BUDGET,
            aclient=previous_client(url),
            prefix=prefix,
            breaker=CircuitBreaker(failure_threshold=NEVER_OPENS),
        )
        timeouts_only = RedisQuotaLedger(
            BUDGET, url=url, prefix=prefix, breaker=CircuitBreaker(failure_threshold=NEVER_OPENS)
        )
        now = RedisQuotaLedger(BUDGET, url=url, prefix=prefix)
        ledgers = {
            "previous settings (0.5 s, timeout retried, no breaker)": previous,
            "timeouts only (0.25 s, not retried, no breaker)": timeouts_only,
            "now (0.25 s + breaker: 3 failures, 5 s)": now,
        }
        try:
            pair_ns = breaker_pair_ns()
            spend_us = await healthy_spend_us(now)
            for ledger in ledgers.values():
                assert (await ledger.atry_spend("chat_gen")).allowed  # connections open, healthy
            server.freeze()
            costs = {name: await frozen_costs(ledger, calls) for name, ledger in ledgers.items()}
            back_s = await recovery_s(server, now)
        finally:
            server.stop()
            for ledger in ledgers.values():
                await ledger.aclose()

    print(
        f"Python {platform.python_version()}, redis-py {redis.__version__}, loopback TCP, "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; "
        f"{calls} spends per row against a redis-server frozen by SIGSTOP\n"
    )
    print("| configuration | 1st spend (s) | spends 4+ median (ms) | all spends (s) |")
    print("|---|---:|---:|---:|")
    for name, spent in costs.items():
        print(
            f"| {name} | {spent[0]:.3f} | {statistics.median(spent[3:]) * 1000:.3f} "
            f"| {sum(spent):.2f} |"
        )
    print(
        f"\nhealthy Redis: one spend {spend_us:.0f} µs (median); the breaker's admit + succeeded "
        f"{pair_ns:.0f} ns ({pair_ns / 10 / spend_us:.2f}% of it)"
    )
    print(f"after SIGCONT, spends allowed again after {back_s:.2f} s (the open breaker's pause)")


if __name__ == "__main__":
    main()
