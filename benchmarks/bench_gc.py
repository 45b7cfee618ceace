"""How much of a turn's CPU is Python's cyclic garbage collector, per generation.

Run on demand (not in CI):

    python benchmarks/bench_gc.py [--top-k 100] [--turns 60] [--freeze]

Builds ``bench_turn.py``'s 10k-row index and graph, warms it with 10 turns, then times ``--turns``
turns of ``graph.ainvoke`` (process CPU) while ``gc.callbacks`` time every collection.
``--freeze`` calls ``gc.freeze()`` after the warm-up, so full collections skip every object that
existed by then (the modules of LangGraph, LangChain and pydantic among them).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import time
from typing import Any

import bench_turn as bench


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top-k", type=int, default=0)
    parser.add_argument("--turns", type=int, default=60)
    parser.add_argument("--freeze", action="store_true")
    args = parser.parse_args()
    graph = bench.Tree(bench.load_tiers(bench.build_corpus(10_000)), args.top_k or None).graph

    async def turns(n: int) -> None:
        for _ in range(n):
            await graph.ainvoke({"query": bench.next_query()})

    asyncio.run(turns(10))
    began, spent = [0.0], {generation: [0, 0.0] for generation in range(3)}

    def timed(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            began[0] = time.perf_counter()
        else:
            spent[info["generation"]][0] += 1
            spent[info["generation"]][1] += time.perf_counter() - began[0]

    if args.freeze:
        gc.freeze()
    full = time.perf_counter()
    gc.collect()
    full = time.perf_counter() - full
    gc.callbacks.append(timed)
    cpu = time.process_time()
    asyncio.run(turns(args.turns))
    cpu = (time.process_time() - cpu) / args.turns * 1000
    print(
        f"top_k={args.top_k or 'default'} freeze={args.freeze}: {cpu:.1f} ms CPU per turn; "
        f"a full collection of {len(gc.get_objects()):,} tracked objects takes {full * 1000:.0f} ms"
    )
    for generation, (count, seconds) in spent.items():
        print(
            f"  generation {generation}: {count / args.turns:.2f} collections per turn, "
            f"{seconds / args.turns * 1000:.2f} ms per turn"
        )


if __name__ == "__main__":
    main()
