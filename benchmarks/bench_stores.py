"""Quota and cache stores, memory vs Redis, measured side by side in one run.

Run on demand (not in CI):  python benchmarks/bench_stores.py [--seconds 2] [--redis-url URL]

Without ``--redis-url`` (or ``REDIS_URL``) a throwaway ``redis-server`` is started on a loopback
port, as in the tests. Quota rows are spends per second with a budget that never runs out; cache
rows are the latency of a hit, in microseconds. Redis numbers include the loopback round trip.
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
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import redis

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from fixtures.redis_server import RedisServer

from ragtiller.stores import (
    Cache,
    MemoryCache,
    MemoryQuotaLedger,
    QuotaLedger,
    RedisCache,
    RedisQuotaLedger,
    cache_key,
)

BUDGET = {"chat_gen": 10**15}
VALUE = {
    "generalized": "What are the first steps to set up and run the service?",
    "ids": [f"doc-{i:04d}#chunk-{i}" for i in range(12)],
    "scores": [round(1 - i / 12, 4) for i in range(12)],
}
KEY = cache_key("step_back", "how do I get started?")


async def aspends_per_s(ledger: QuotaLedger, seconds: float, tasks: int) -> float:
    """Spends per second by ``tasks`` asyncio tasks awaiting ``atry_spend`` for ``seconds``."""
    stop = time.perf_counter() + seconds

    async def run() -> int:
        n = 0
        while time.perf_counter() < stop:
            await ledger.atry_spend("chat_gen")
            n += 1
        return n

    began = time.perf_counter()
    counts = await asyncio.gather(*(run() for _ in range(tasks)))
    return sum(counts) / (time.perf_counter() - began)


async def ahit_latencies_us(cache: Cache, seconds: float) -> list[float]:
    """Latency of each ``aget`` hit over ``seconds``, in microseconds."""
    samples: list[float] = []
    stop = time.perf_counter() + seconds
    while time.perf_counter() < stop:
        began = time.perf_counter_ns()
        await cache.aget(KEY)
        samples.append((time.perf_counter_ns() - began) / 1000)
    return samples


def p50_p95(samples: list[float]) -> tuple[float, float]:
    cuts = statistics.quantiles(samples, n=100)
    return cuts[49], cuts[94]


@contextmanager
def redis_url(given: str | None) -> Iterator[str]:
    """The URL to benchmark against, starting a throwaway server when none is given."""
    if given:
        yield given
        return
    with tempfile.TemporaryDirectory() as workdir:
        server = RedisServer("redis-server", Path(workdir))
        server.start()
        try:
            yield server.url
        finally:
            server.stop()


def server_version(url: str) -> str:
    with redis.Redis.from_url(url) as client:
        return str(client.info("server")["redis_version"])


async def measure(url: str, seconds: float) -> list[tuple[str, str, str]]:
    """Every row of the table: (what, memory, redis)."""
    prefix = f"bench:{os.getpid()}:"
    ledgers: dict[str, QuotaLedger] = {
        "memory": MemoryQuotaLedger(BUDGET),
        "redis": RedisQuotaLedger(BUDGET, url=url, prefix=prefix),
    }
    caches: dict[str, Cache] = {
        "memory": MemoryCache(),
        "redis": RedisCache(url=url, prefix=prefix),
    }
    rows: list[tuple[str, str, str]] = []

    def row(what: str, numbers: dict[str, float], fmt: str) -> None:
        rows.append((what, format(numbers["memory"], fmt), format(numbers["redis"], fmt)))

    try:
        for tasks in (1, 32):
            row(
                f"quota `atry_spend`, async, {tasks} task{'s' * (tasks > 1)} (spends/s)",
                {b: await aspends_per_s(ledger, seconds, tasks) for b, ledger in ledgers.items()},
                ",.0f",
            )
        for cache in caches.values():
            await cache.aset(KEY, VALUE, ttl_s=3600)
        aget = {b: p50_p95(await ahit_latencies_us(cache, seconds)) for b, cache in caches.items()}
        row("cache hit `aget` p50 (µs)", {b: q[0] for b, q in aget.items()}, ",.1f")
        row("cache hit `aget` p95 (µs)", {b: q[1] for b, q in aget.items()}, ",.1f")
    finally:
        with redis.Redis.from_url(url) as client:
            for name in client.scan_iter(match=f"{prefix}*"):
                client.delete(name)
        for ledger in ledgers.values():
            await ledger.aclose()
        for cache in caches.values():
            await cache.aclose()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="per measurement")
    parser.add_argument("--redis-url", default=os.environ.get("REDIS_URL"))
    args = parser.parse_args()
    with redis_url(args.redis_url) as url:
        rows = asyncio.run(measure(url, args.seconds))
        version = server_version(url)
    print(
        f"Python {platform.python_version()}, redis-py {redis.__version__}, redis-server {version}"
        f" on loopback TCP, {os.cpu_count()} CPUs, {platform.machine()}; "
        f"{args.seconds:g} s per measurement; load average {os.getloadavg()[0]:.1f}\n"
    )
    print("| measurement | memory | redis |")
    print("|---|---:|---:|")
    for what, memory, shared in rows:
        print(f"| {what} | {memory} | {shared} |")


if __name__ == "__main__":
    main()
