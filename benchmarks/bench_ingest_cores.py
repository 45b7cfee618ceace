"""Local ingest speed: ``ragtiller ingest`` of one corpus by this tree and by a baseline commit,
interleaved in one run, and whether both built the same vectors.

Each run is the CLI a user types, in a fresh process, into a new index directory, with the
default settings (the bundled MiniLM on onnxruntime int8). chunks/s is the index's chunks over
the wall-clock seconds of the whole command (start-up, chunking, embedding, BM25, derived
structures, save); CPU is the child's user + system time. Run on demand (not in CI; offline):

    python benchmarks/bench_ingest_cores.py --baseline f920e6d [--corpus PATH] [--rounds 2]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from baseline import ROOT, baseline_tree

CACHE = Path(tempfile.gettempdir()) / "ragtiller-bench-ingest-cores"
CORPUS = ROOT / ".." / "shared" / "data" / "cranfield" / "corpus.jsonl"


def ingest(tree: Path, corpus: Path, index: Path) -> tuple[float, float]:
    """Wall and CPU seconds of one ``ragtiller ingest`` by the package under ``tree``."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "ragtiller",
            "ingest",
            str(corpus),
            "--index",
            str(index),
            "--quiet",
        ],
        env=env,
        cwd=tree,  # `python -m` puts the working directory first on sys.path
        check=True,
        stdout=subprocess.DEVNULL,
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def vectors(index: Path) -> tuple[list[str], np.ndarray]:
    """The chunk ids and vectors of the index's current version."""
    from ragtiller.index import open_index

    store = open_index(index).store
    return list(store.records.ids), np.asarray(store.vectors)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", required=True, help="commit to compare with")
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    trees = {args.baseline: baseline_tree(args.baseline, CACHE), "this tree": ROOT}
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in trees}
    with tempfile.TemporaryDirectory() as tmp:
        built: dict[str, Path] = {}
        for round_ in range(args.rounds):
            names = list(trees) if round_ % 2 == 0 else list(reversed(trees))
            for name in names:
                index = Path(tmp) / f"{name}-{round_}".replace(" ", "-")
                times[name].append(ingest(trees[name], args.corpus, index))
                built[name] = index
        ids, first = vectors(built[args.baseline])
        ids_new, second = vectors(built["this tree"])
        chunks = len(ids)
    print(f"{args.corpus}: {chunks} chunks; load average {os.getloadavg()[0]:.1f} at the end")
    print("tree        chunks/s (median)  CPU s (median)  chunks/s per round")
    base = statistics.median(chunks / w for w, _ in times[args.baseline])
    for name, runs in times.items():
        rate = statistics.median(chunks / w for w, _ in runs)
        cpu = statistics.median(c for _, c in runs)
        rounds = ", ".join(f"{chunks / w:.1f}" for w, _ in runs)
        print(f"{name:<11} {rate:>8.1f} ({rate / base:.2f}x)  {cpu:>13.1f}  {rounds}")
    same = ids == ids_new and np.array_equal(first, second)
    print("same chunk ids and vectors, bit for bit:", same)


if __name__ == "__main__":
    main()
