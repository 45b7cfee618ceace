"""Retrieval quality on the path users take: default `ragtiller ingest`, then the serving graph.

Run on demand (not in CI; needs the bundled MiniLM):

    python benchmarks/bench_eval_quality.py                 # the table, both collections
    python benchmarks/bench_eval_quality.py --mechanisms    # each mechanism on / off, tune + held-out
    python benchmarks/bench_eval_quality.py --latency       # turn latency with / without each
    python benchmarks/bench_eval_quality.py --select        # how the shipped default was chosen

Each collection's index is built ONCE with exactly what `ragtiller ingest <corpus.jsonl> --index
DIR` does by default (bundled MiniLM, default chunking) into ``--cache-dir/<name>`` and reused.
Every row runs every judged query through ``build_graph`` + ``run_eval`` (the code path of
``ragtiller eval``), with the policy's result size raised to 100 (``ragtiller eval --top-k 100``)
so Recall@100 is defined. Query vectors are memoised per run (many policies, same queries).

``--select`` is the selection the shipped default came from: every point of a small space,
evaluated on the TUNE half of every collection, ranked by its smallest tune-half lift over the
previous default (a default must help every collection, not the average). The held-out halves
are printed beside it, but only ``ragtiller promote`` on them confirms the choice.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain_core.embeddings import Embeddings

from ragtiller.eval import EvalDataset, load_beir, run_eval, summarize
from ragtiller.eval.honesty import check_degraded, without_deadlines
from ragtiller.eval.query_cache import QueryVectorCache
from ragtiller.eval.summary import query_scores
from ragtiller.eval.variants import with_depth, with_overrides
from ragtiller.graph.builder import build_graph
from ragtiller.index import EmbeddedIndex, open_index
from ragtiller.index.versions import is_index_directory
from ragtiller.ingest import ingest
from ragtiller.models import local_embedder
from ragtiller.policies import RetrievalPolicy, load_policy

HERE = Path(__file__).resolve().parent
DATA = Path("/work/shared/data")
COLLECTIONS = ("cranfield", "cacm")
DEPTH = 100
REFERENCE = {  # dataset READMEs: NDCG@10, MRR@10, Recall@100 (document level, same MiniLM, bm25s)
    "cranfield": {
        "BM25": (0.3735, 0.5315, 0.7381),
        "dense": (0.3817, 0.5380, 0.7724),
        "RRF": (0.4222, 0.5834, 0.7844),
        "z-score": (0.4162, 0.5587, 0.7850),
        "min-max": (0.4152, 0.5602, 0.7857),
    },
    "cacm": {
        "BM25": (0.4935, 0.7471, 0.6774),
        "dense": (0.4091, 0.6070, 0.7163),
        "RRF": (0.5419, 0.7771, 0.7460),
        "z-score": (0.5426, 0.7955, 0.7506),
        "min-max": (0.5462, 0.7939, 0.7486),
    },
}
FUSIONS = ("RRF", "z-score", "min-max")
PREVIOUS = "previous_default_2026-11-29.yaml"

ROWS: list[tuple[str, str]] = [
    ("**shipped default** (2026-11-30)", "default"),
    ("previous default (2026-11-29)", PREVIOUS),
    (
        "candidate 2026-11-30 without fused feedback, not shipped (`candidate_2026-11-30.yaml`)",
        "candidate_2026-11-30.yaml",
    ),
    (
        "z-score candidate, rejected (`rejected_zscore_2026-11-30.yaml`)",
        "rejected_zscore_2026-11-30.yaml",
    ),
    ("BM25 alone over chunks (`bm25.yaml`)", "bm25.yaml"),
    ("dense alone over chunks (`dense.yaml`)", "dense.yaml"),
]

# Each mechanism as an override of the shipped default: switched OFF (when the default has it)
# or ON (when it does not). The rows say which.
MECHANISMS: list[tuple[str, dict[str, Any]]] = [
    ("shipped default (doc max, section BM25, RRF, parent-child 0, fused Rocchio 3/2)", {}),
    ("- Rocchio from the dense tier's own first pass", {"feedback.dense_source": "tier"}),
    (
        "- Rocchio from the tier's own first pass, weight 0.5 (candidate 2026-11-30)",
        {"feedback.dense_source": "tier", "feedback.dense_weight": 0.5},
    ),
    ("- Rocchio off", {"feedback.dense": "off"}),
    ("- chunks, not documents (doc_aggregation off)", {"fusion.doc_aggregation": "off"}),
    ("~ doc_aggregation sum instead of max", {"fusion.doc_aggregation": "sum"}),
    ("- chunk BM25 instead of section BM25", {"fusion.lexical_unit": "chunk"}),
    ("+ RM3 on (10 docs, 10 terms, original weight 0.5)", {"feedback.lexical": "rm3"}),
    ("~ z-score instead of RRF", {"fusion.method": "zscore"}),
    ("~ min-max instead of RRF", {"fusion.method": "minmax"}),
    ("~ parent-child weight 1", {"fusion.tier_weights": {"parent_child": 1.0}}),
]

# The space --select searched: fusion method x fused-feedback documents x feedback weight, on
# top of the 2026-11-30 candidate (doc max, section BM25, parent-child 0); plus the candidate's
# own tier-feedback Rocchio and no Rocchio, per fusion method.
SELECT_BASE = "candidate_2026-11-30.yaml"
SELECT_SPACE: list[tuple[str, dict[str, Any]]] = [
    (
        f"{method} fused Rocchio {docs}/{weight}",
        {
            "fusion.method": method,
            "feedback.dense_source": "fused",
            "feedback.dense_docs": docs,
            "feedback.dense_weight": weight,
        },
    )
    for method, docs, weight in itertools.product(
        ("rrf", "minmax", "zscore"), (2, 3, 5), (0.5, 1.0, 2.0)
    )
] + [
    variant
    for method in ("rrf", "minmax", "zscore")
    for variant in (
        (f"{method} tier Rocchio 3/0.5", {"fusion.method": method}),
        (f"{method} no Rocchio", {"fusion.method": method, "feedback.dense": "off"}),
    )
]


def default_index(name: str, cache_dir: Path) -> EmbeddedIndex:
    """The collection's index as `ragtiller ingest corpus.jsonl --index DIR` builds it."""
    target = cache_dir / name
    if not is_index_directory(target):
        started = time.perf_counter()
        ingest([DATA / name / "corpus.jsonl"], target, embedder=local_embedder(), progress=False)
        print(f"built {target} in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    return open_index(target)


def load(name: str) -> RetrievalPolicy:
    """A shipped policy name or a file under benchmarks/policies/, sized to DEPTH."""
    policy = load_policy(name if name == "default" else HERE / "policies" / name)
    return with_depth(policy, DEPTH)


def evaluate(
    policy: RetrievalPolicy,
    index: EmbeddedIndex,
    dataset: EvalDataset,
    embedder: Embeddings,
    halves: Sequence[EvalDataset] = (),
    concurrency: int = 4,
) -> dict[str, float]:
    """NDCG@10, MRR@10, Recall@100, p50/p95 turn ms and LLM calls per turn of one run; with
    ``halves``, also the NDCG@10 of each half (``half0``, ``half1``) from the same run.

    As ``ragtiller eval``: the policy's deadlines lifted, and a degraded turn is an error."""
    graph = build_graph(without_deadlines(policy), index=index, embedder=embedder)
    run = run_eval(graph, dataset, progress=False, concurrency=concurrency)
    check_degraded(run, allow=False, what=f"{policy.policy_id} on {dataset.name}")
    m = summarize(run, dataset)["all"]
    total = m.latency_ms["total"]
    out = {
        "ndcg": m.ndcg_at_10 or 0.0,
        "mrr": m.mrr_at_10 or 0.0,
        "r100": m.recall_at_100 or 0.0,
        "p50": total.p50 or 0.0,
        "p95": total.p95 or 0.0,
        "llm": m.llm_calls_per_turn,
    }
    scores = query_scores(run, dataset)
    for i, half in enumerate(halves):
        judged = [s.ndcg_at_10 for q in half.queries if (s := scores[q]) is not None]
        out[f"half{i}"] = sum(judged) / len(judged)
    return out


def table(cache_dir: Path, seed: int, names: Sequence[str] = COLLECTIONS) -> None:
    """The headline table: one block per collection, reference baselines beside it."""
    for name in names:
        index = default_index(name, cache_dir)
        full = load_beir(DATA / name)
        tune, held = full.split_halves(seed=seed)
        emb = QueryVectorCache(index.embedder)
        c = index.manifest.counts
        chunking = index.manifest.chunking
        print(
            f"\n### {name}: {len(full.queries)} judged queries; default ingest = {c.chunks} chunks "
            f"({chunking.chunk_tokens}/{chunking.overlap_tokens} words) of {c.documents} documents\n"
        )
        print(
            "| row | NDCG@10 | MRR@10 | Recall@100 | NDCG@10 tune half | NDCG@10 held-out half | LLM calls/turn |"
        )
        print("|---|---|---|---|---|---|---|")
        for label, file in ROWS:
            policy = load(file)
            m = evaluate(policy, index, full, emb, (tune, held))
            t, h = m["half0"], m["half1"]
            print(
                f"| {label} | {m['ndcg']:.4f} | {m['mrr']:.4f} | {m['r100']:.4f} "
                f"| {t:.4f} | {h:.4f} | {m['llm']:.0f} |"
            )
        for ref, (n, r, rec) in REFERENCE[name].items():
            print(
                f"| reference {ref} (dataset README, document level) | {n:.4f} | {r:.4f} | {rec:.4f} | | | |"
            )
        best = max(REFERENCE[name][f][0] for f in FUSIONS)
        print(f"\nbest reference fusion {best:.4f}; goal >= {best + 0.01:.4f}")


def mechanisms(cache_dir: Path, seed: int) -> None:
    """Each mechanism switched against the shipped default, on both halves of both collections."""
    base = load("default")
    variants = list(MECHANISMS)
    print(
        "| variant | "
        + " | ".join(f"{n} tune | {n} held-out | {n} all" for n in COLLECTIONS)
        + " |"
    )
    print("|---|" + "---|---|---|" * len(COLLECTIONS))
    results: dict[str, list[str]] = {label: [] for label, _ in variants}
    for name in COLLECTIONS:
        index = default_index(name, cache_dir)
        full = load_beir(DATA / name)
        halves = full.split_halves(seed=seed)
        emb = QueryVectorCache(index.embedder)
        for label, overrides in variants:
            policy = with_overrides(base, overrides)
            m = evaluate(policy, index, full, emb, halves)
            cells = [m["half0"], m["half1"], m["ndcg"]]
            results[label] += [f"{v:.4f}" for v in cells]
            print(f"{name} {label}: {cells}", file=sys.stderr)
    for label, cells in results.items():
        print(f"| {label} | " + " | ".join(cells) + " |")


def latency(cache_dir: Path, repeats: int) -> None:
    """Turn latency p50/p95 with and without each query-time mechanism, side by side."""
    base = load("default")
    variants = [
        ("shipped default (doc max, section BM25, fused Rocchio)", {}),
        ("Rocchio from the tier's own first pass", {"feedback.dense_source": "tier"}),
        ("Rocchio off", {"feedback.dense": "off"}),
        ("doc_aggregation off", {"fusion.doc_aggregation": "off"}),
        ("lexical_unit chunk", {"fusion.lexical_unit": "chunk"}),
        ("RM3 on", {"feedback.lexical": "rm3"}),
        (
            "none of them",
            {
                "fusion.doc_aggregation": "off",
                "fusion.lexical_unit": "chunk",
                "feedback.dense": "off",
            },
        ),
    ]
    print(
        "| variant | "
        + " | ".join(f"{n} p50 ms | {n} p95 ms" for n in COLLECTIONS)
        + " | LLM calls/turn |"
    )
    print("|---|" + "---|---|" * len(COLLECTIONS) + "---|")
    cells: dict[str, list[str]] = {label: [] for label, _ in variants}
    llm: dict[str, float] = {}
    for name in COLLECTIONS:
        index = default_index(name, cache_dir)
        full = load_beir(DATA / name)
        emb = QueryVectorCache(index.embedder)
        policies = [(label, with_overrides(base, o)) for label, o in variants]
        evaluate(policies[0][1], index, full, emb)  # warm: query vectors, section BM25
        best: dict[str, dict[str, float]] = {}
        for _ in range(repeats):  # interleaved, so load drift hits every variant alike
            for label, policy in policies:
                m = evaluate(policy, index, full, emb, concurrency=1)
                if label not in best or m["p50"] < best[label]["p50"]:
                    best[label] = m
                llm[label] = max(llm.get(label, 0.0), m["llm"])
        for label, _ in variants:
            cells[label] += [f"{best[label]['p50']:.1f}", f"{best[label]['p95']:.1f}"]
    for label, _ in variants:
        print(f"| {label} | " + " | ".join(cells[label]) + f" | {llm[label]:.0f} |")


def select(cache_dir: Path, seed: int) -> None:
    """Rank SELECT_SPACE by its smallest tune-half lift over the previous default."""
    base, previous = load(SELECT_BASE), load(PREVIOUS)
    rows: dict[str, dict[str, dict[str, float]]] = {label: {} for label, _ in SELECT_SPACE}
    before: dict[str, dict[str, float]] = {}
    for name in COLLECTIONS:
        index = default_index(name, cache_dir)
        full = load_beir(DATA / name)
        halves = full.split_halves(seed=seed)
        emb = QueryVectorCache(index.embedder)
        before[name] = evaluate(previous, index, full, emb, halves)
        for label, overrides in SELECT_SPACE:
            rows[label][name] = evaluate(with_overrides(base, overrides), index, full, emb, halves)
            print(f"{name} {label}: {rows[label][name]['ndcg']:.4f}", file=sys.stderr)

    def lift(label: str, name: str, half: str) -> float:
        return rows[label][name][half] - before[name][half]

    ranked = sorted(rows, key=lambda label: -min(lift(label, n, "half0") for n in COLLECTIONS))
    print(
        "| variant | smallest tune lift | "
        + " | ".join(f"{n} tune lift | {n} held-out lift | {n} all" for n in COLLECTIONS)
        + " |"
    )
    print("|---|---|" + "---|---|---|" * len(COLLECTIONS))
    for label in ranked:
        cells = [
            f"{lift(label, n, 'half0'):+.4f} | {lift(label, n, 'half1'):+.4f} | "
            f"{rows[label][n]['ndcg']:.4f}"
            for n in COLLECTIONS
        ]
        worst = min(lift(label, n, "half0") for n in COLLECTIONS)
        print(f"| {label} | {worst:+.4f} | " + " | ".join(cells) + " |")
    print(
        "\nprevious default, NDCG@10 tune / held-out / all: "
        + "; ".join(
            f"{n} {before[n]['half0']:.4f} / {before[n]['half1']:.4f} / {before[n]['ndcg']:.4f}"
            for n in COLLECTIONS
        )
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--cache-dir", type=Path, default=Path(tempfile.gettempdir()) / "ragtiller-quality"
    )
    parser.add_argument("--seed", type=int, default=0, help="Seed of the tune/held-out split.")
    parser.add_argument("--mechanisms", action="store_true", help="Ablate each mechanism.")
    parser.add_argument("--latency", action="store_true", help="Latency with/without each.")
    parser.add_argument("--select", action="store_true", help="Rank the default's search space.")
    parser.add_argument(
        "--collection", choices=COLLECTIONS, action="append", help="Only these (repeatable)."
    )
    parser.add_argument("--repeats", type=int, default=1, help="Latency: runs per variant.")
    args = parser.parse_args(argv)
    if args.mechanisms:
        mechanisms(args.cache_dir, args.seed)
    elif args.latency:
        latency(args.cache_dir, args.repeats)
    elif args.select:
        select(args.cache_dir, args.seed)
    else:
        table(args.cache_dir, args.seed, args.collection or COLLECTIONS)


if __name__ == "__main__":
    main()
