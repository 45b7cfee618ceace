"""Turns in flight at once, healthy providers: throughput, latency and degraded turns, side by
side with an older commit.

Run on demand (not in CI):

    python benchmarks/bench_load.py [--baseline 7508b12] [--rounds 3] [--batches 4]

Each configuration is a number of turns in flight (50, 200) and an embedder latency (instant,
100 ms); the embedder sleeps for its latency (a remote API: the GIL is free meanwhile) and the
two tiers are third-party tiers (a plain ``search`` method, so each runs on its own bulkhead,
as a Pinecone or SQL tier would), answering at once. The query is narrow (no step-back, no
chat model). A batch starts ``in_flight`` ``ainvoke`` turns together with ``asyncio.gather``
and waits for all of them; the graph is built once per configuration and warmed up with one
small batch, so the pools are already started, as in a running service.

Reported per configuration and tree: throughput (turns per second of batch wall time), the
p50 and p95 of a turn's latency (from the batch start to that turn's answer), and how many
turns were degraded (any label). A tree that sheds turns looks fast: read throughput with the
degraded count beside it.

The baseline commit is extracted with ``git archive`` into ``$TMPDIR`` (nothing in the
repository changes). Each round runs one worker subprocess per tree, alternating which goes
first, with ``PYTHONPATH`` set to that tree; the figures pool every round.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from baseline import baseline_tree

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("TMPDIR", tempfile.gettempdir())) / "ragtiller-bench-load"
CONFIGS = [(50, 0.0), (50, 0.1), (200, 0.0), (200, 0.1)]
"""(turns in flight, embedder latency in seconds)."""


# --- the worker (runs with either tree on PYTHONPATH) ----------------------------------------


def make_graph(latency_s: float) -> Any:
    from langchain_core.embeddings import DeterministicFakeEmbedding, Embeddings

    from ragtiller import build_graph
    from ragtiller.core.tiers import Hit, SearchRequest

    class Embedder(Embeddings):
        def __init__(self) -> None:
            self.inner = DeterministicFakeEmbedding(size=64)

        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return [self.embed_query(t) for t in texts]

        def embed_query(self, text: str) -> list[float]:
            if latency_s:
                time.sleep(latency_s)
            return self.inner.embed_query(text)

    class Tier:
        def __init__(self, name: str, needs_vector: bool) -> None:
            self.name = name
            self.needs_vector = needs_vector
            self.hits = [
                Hit(
                    id=f"{name}{i}",
                    text=f"text {i} of {name}",
                    score=1.0 - i / 10,
                    doc_id=f"{name}{i}",
                    parent_id=None,
                    source=f"src/{name}{i}",
                    metadata={},
                )
                for i in range(5)
            ]

        def search(self, request: SearchRequest) -> list[Hit]:
            return self.hits[: request.k]

    return build_graph(
        require_tenant=False,
        embedder=Embedder(),
        tiers=[Tier("dense", True), Tier("lexical", False)],
    )


async def batch(graph: Any, in_flight: int, start: int) -> tuple[float, list[float], int]:
    """One batch: wall time, each turn's latency, and the number of degraded turns."""
    began = time.perf_counter()
    latencies: list[float] = []

    async def one(n: int) -> bool:
        out = await graph.ainvoke({"query": f"which port does the server use, case {n}"})
        latencies.append(time.perf_counter() - began)
        return bool(out["manifest"].degraded)

    degraded = await asyncio.gather(*(one(start + i) for i in range(in_flight)))
    return time.perf_counter() - began, latencies, sum(degraded)


def worker(batches: int) -> None:
    import ragtiller

    results: dict[str, Any] = {}

    async def run() -> None:
        for in_flight, latency_s in CONFIGS:
            graph = make_graph(latency_s)
            await batch(graph, 10, 0)  # warm-up: the pools start their first threads
            walls, latencies, degraded = [], [], 0
            for b in range(batches):
                wall, lat, bad = await batch(graph, in_flight, (b + 1) * 1000)
                walls.append(wall)
                latencies += lat
                degraded += bad
            results[f"{in_flight}/{latency_s}"] = {
                "walls": walls,
                "latencies": latencies,
                "degraded": degraded,
                "turns": batches * in_flight,
            }

    asyncio.run(run())
    print(json.dumps({"tree": str(Path(ragtiller.__file__).parents[1]), "results": results}))


# --- the driver ------------------------------------------------------------------------------


def run_worker(tree: Path, batches: int) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONHASHSEED": "0"}
    env.pop("REDIS_URL", None)
    out = subprocess.run(
        [sys.executable, __file__, "--worker", "--batches", str(batches)],
        env=env,
        cwd=tree,
        check=True,
        capture_output=True,
        text=True,
    )
    payload = json.loads(out.stdout.strip().splitlines()[-1])
    if Path(payload["tree"]).resolve() != tree.resolve():
        raise RuntimeError(f"worker imported ragtiller from {payload['tree']}, not {tree}")
    results: dict[str, Any] = payload["results"]
    return results


def pooled(runs: list[dict[str, Any]], key: str) -> dict[str, Any]:
    walls = [w for run in runs for w in run[key]["walls"]]
    latencies = sorted(x for run in runs for x in run[key]["latencies"])
    turns = sum(run[key]["turns"] for run in runs)
    return {
        "throughput": turns / sum(walls),
        "p50": statistics.median(latencies) * 1000,
        "p95": latencies[min(len(latencies) - 1, int(len(latencies) * 0.95))] * 1000,
        "degraded": sum(run[key]["degraded"] for run in runs),
        "turns": turns,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", default="7508b12", help="commit to compare with")
    parser.add_argument("--rounds", type=int, default=3, help="worker pairs, alternating order")
    parser.add_argument("--batches", type=int, default=4, help="batches per configuration")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.batches)
        return
    trees = {args.baseline: baseline_tree(args.baseline, CACHE), "new": ROOT}
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
    for r in range(args.rounds):
        order = list(trees) if r % 2 == 0 else list(reversed(trees))
        for name in order:
            runs[name].append(run_worker(trees[name], args.batches))
    old, new = args.baseline, "new"
    print(
        f"| in flight | embedder | {old} turns/s | {old} p50 ms | {old} p95 ms | {old} degraded "
        "| new turns/s | new p50 ms | new p95 ms | new degraded |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for in_flight, latency_s in CONFIGS:
        key = f"{in_flight}/{latency_s}"
        a, b = pooled(runs[old], key), pooled(runs[new], key)
        embedder = f"{latency_s * 1000:.0f} ms" if latency_s else "instant"
        cells = [
            f"{s['throughput']:.0f} | {s['p50']:.0f} | {s['p95']:.0f} | "
            f"{s['degraded']} of {s['turns']}"
            for s in (a, b)
        ]
        print(f"| {in_flight} | {embedder} | {cells[0]} | {cells[1]} |")


if __name__ == "__main__":
    main()
