"""What ``feedback.passage_positions`` costs a turn, one fresh process per run.

Opens a saved index (``bench_scale.py``'s cache), builds the default graph with
``passage_positions`` set to ``moved`` or ``query``, and prints open + build_graph + the first
turn (wall and CPU s), the CPU p50/p95 of the next turns (ms), and the resident memory gained.

    python benchmarks/bench_positions_cost.py $TMPDIR/ragtiller-bench-scale/index-100000-format2 query
"""

from __future__ import annotations

import argparse
import itertools
import time

import numpy as np
from bench_scale import QUERY, rss, warm_up

from ragtiller import build_graph
from ragtiller.index.opening import open_index
from ragtiller.policies import load_policy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("index")
    parser.add_argument("positions", choices=["moved", "query"])
    parser.add_argument("--turns", type=int, default=30)
    args = parser.parse_args()
    policy = load_policy(None)
    feedback = policy.feedback.model_copy(update={"passage_positions": args.positions})
    policy = policy.model_copy(update={"feedback": feedback})
    warm_up()
    before, counter = rss(), itertools.count()
    wall, cpu = time.perf_counter(), time.process_time()
    graph = build_graph(policy, index=open_index(args.index))
    graph.invoke({"query": QUERY.format(n=next(counter))})
    open_wall, open_cpu = time.perf_counter() - wall, time.process_time() - cpu
    turns = []
    for _ in range(args.turns):
        started = time.process_time()
        graph.invoke({"query": QUERY.format(n=next(counter))})
        turns.append((time.process_time() - started) * 1000)
    gained = (sum(rss().values()) - sum(before.values())) / 1e6
    print(
        f"{args.index} positions={args.positions}: open + first turn {open_wall:.2f} s "
        f"({open_cpu:.2f} s CPU); turn CPU p50 {np.percentile(turns, 50):.1f} ms, "
        f"p95 {np.percentile(turns, 95):.1f} ms; memory +{gained:.0f} MB"
    )


if __name__ == "__main__":
    main()
