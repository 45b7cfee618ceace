"""Run context and Studio truth: what they cost per turn, and what a checkpoint holds.

Run on demand (not in CI):  python benchmarks/bench_run_context.py [--turns 400]

1. Per-turn wall time, side by side in one run (interleaved rounds, trivial tiers, so the
   graph's own work dominates): stage events NOT handed to LangChain callbacks at all (the
   pre-change behaviour), handed over but nobody listening (a plain ``ainvoke``), a run context
   (``top_k``) vs none, and ``astream_events(version="v2")`` where a listener takes every event.
2. Bytes a checkpointer stores for one turn on the Studio demo index (stdlib docs, hashing
   embedder): the whole state after each step, hit lists included.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from langgraph.checkpoint.memory import InMemorySaver

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from fixtures.fakes import StaticTier, hit

from ragtiller import build_graph
from ragtiller.graph import checkpoint_serde, per_run
from ragtiller.models import HashingEmbedder

QUERY = "which port does the server listen on by default"


def tiers() -> list[StaticTier]:
    return [
        StaticTier("dense", [hit("dense", f"c{i}", 1 - i / 50) for i in range(20)]),
        StaticTier(
            "lexical", [hit("lexical", f"c{i}", 10 - i) for i in range(20)], needs_vector=False
        ),
    ]


async def quiet(update: Any) -> None:
    """``announce`` replaced by nothing: no callback hand-over at all."""


async def time_turns(graph: Any, mode: str, turns: int) -> float:
    """Median per-turn milliseconds of ``turns`` turns in ``mode``."""
    times = []
    for _ in range(turns):
        started = time.perf_counter()
        if mode == "events":
            async for _ in graph.astream_events({"query": QUERY}, version="v2"):
                pass
        elif mode == "context":
            await graph.ainvoke({"query": QUERY}, context={"top_k": 3})
        else:
            await graph.ainvoke({"query": QUERY})
        times.append((time.perf_counter() - started) * 1000.0)
    return statistics.median(times)


async def overhead(turns: int, rounds: int = 5) -> None:
    graph = build_graph(require_tenant=False, tiers=tiers(), embedder=HashingEmbedder(dim=32))
    original = per_run.announce
    results: dict[str, list[float]] = {}
    for _ in range(rounds):
        per_run.announce = quiet
        results.setdefault("no hand-over (before)", []).append(
            await time_turns(graph, "plain", turns)
        )
        per_run.announce = original
        results.setdefault("hand-over, nobody listening", []).append(
            await time_turns(graph, "plain", turns)
        )
        results.setdefault("with run context top_k=3", []).append(
            await time_turns(graph, "context", turns)
        )
        results.setdefault("astream_events v2 (listening)", []).append(
            await time_turns(graph, "events", max(1, turns // 4))
        )
    base = statistics.median(results["no hand-over (before)"])
    print(f"per-turn median over {rounds} interleaved rounds of {turns} turns (ms):")
    for name, values in results.items():
        ms = statistics.median(values)
        print(f"  {name:32s} {ms:7.3f}  x{ms / base:.3f}")


def stored_bytes(saver: InMemorySaver) -> int:
    blobs = sum(len(blob[1]) for blob in saver.blobs.values())
    writes = sum(
        len(write[2][1])
        for per_task in saver.writes.values()
        for write in per_task.values()
        if isinstance(write[2], tuple)
    )
    return blobs + writes


def checkpoint_sizes() -> None:
    from ragtiller.integrations.studio import studio_index

    index = studio_index({})
    question = "how do I run several coroutines concurrently?"
    print(f"checkpointer bytes stored for one turn ({question!r}, Studio demo index):")
    saver = InMemorySaver(serde=checkpoint_serde())
    graph = build_graph(index=index, checkpointer=saver)
    graph.invoke({"query": question}, {"configurable": {"thread_id": "t"}})
    print(f"  {'one turn':34s} {stored_bytes(saver):8,d}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=400, help="Turns per round and mode.")
    args = parser.parse_args()
    asyncio.run(overhead(args.turns))
    checkpoint_sizes()


if __name__ == "__main__":
    main()
