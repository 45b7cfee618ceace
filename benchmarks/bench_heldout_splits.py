"""How a candidate's held-out lift over a base moves with the seed of the tune / held-out split.

``ragtiller tune --datasets`` judges a candidate on each collection's held-out half of ONE seeded
split (seed 0), and rejects it when a half shows a lift below 0. On a collection where the
candidate is neutral that is a coin flip. This script scores every query of each collection
once per policy (at the ``top_k`` of its dataset-list entry, as ``tune`` does), then reads the
held-out half's mean lift for seeds 0 to N-1 from those per-query scores: the spread of the
judgement the rule sees. Run on demand (not in CI):

    python benchmarks/bench_heldout_splits.py --base default --candidate P.yaml \\
        --datasets datasets.yaml --seeds 20 [--out results.json]

Primary metric per query, as ``tune`` and ``promote`` compare: NDCG@10 (documents), answer
MRR@10 (passages); an unjudged query counts 0 in both policies.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

from ragtiller.eval.datasets import load_dataset, read_dataset_list
from ragtiller.eval.honesty import without_deadlines
from ragtiller.eval.runner import run_eval
from ragtiller.eval.summary import primary_scores
from ragtiller.eval.variants import with_depth
from ragtiller.graph.builder import build_graph
from ragtiller.index import open_index
from ragtiller.policies import load_policy


def scores(policy: str, entry: Any, dataset: Any, index: Any) -> dict[str, float]:
    """Each query's primary metric under ``policy`` at the entry's depth."""
    depth = entry.top_k or 10
    per_document = None if dataset.kind == "passages" else 1
    tuned = with_depth(load_policy(policy), depth, per_document=per_document)
    run = run_eval(build_graph(without_deadlines(tuned), index=index), dataset, progress=False)
    return {q: s or 0.0 for q, s in primary_scores(run, dataset).items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="default")
    parser.add_argument("--candidate", required=True)
    parser.add_argument("--datasets", type=Path, required=True, help="As `tune --datasets`.")
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    report: dict[str, Any] = {"base": args.base, "candidate": args.candidate, "collections": {}}
    for entry in read_dataset_list(args.datasets):
        dataset = load_dataset(entry.dataset, split=entry.split, slices=entry.slices)
        index = open_index(entry.index)
        base = scores(args.base, entry, dataset, index)
        cand = scores(args.candidate, entry, dataset, index)
        lift = {q: cand[q] - base[q] for q in base}
        held = []
        for seed in range(args.seeds):
            _, half = dataset.split_halves(seed=seed)
            held.append(statistics.fmean(lift[q] for q in half.queries))
        whole = statistics.fmean(lift.values())
        below = sum(x < 0 for x in held)
        report["collections"][dataset.name] = {
            "top_k": entry.top_k,
            "whole": whole,
            "held_out_lift_by_seed": held,
        }
        print(
            f"{dataset.name:12s} whole {whole:+.4f} · held-out lift over {args.seeds} seeds: "
            f"median {statistics.median(held):+.4f}, min {min(held):+.4f}, max {max(held):+.4f}, "
            f"below 0 in {below} · seed 0 {held[0]:+.4f}",
            flush=True,
        )
    if args.out is not None:
        args.out.write_text(json.dumps(report, indent=1) + "\n", "utf-8")


if __name__ == "__main__":
    main()
