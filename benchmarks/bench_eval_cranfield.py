"""Retrieval quality on the Cranfield collection, every row run through the serving graph.

Run on demand (not in CI; needs the ``local`` extra for all-MiniLM-L6-v2):

    python benchmarks/bench_eval_cranfield.py [--dataset DIR] [--cache-dir DIR] [--seed 0]
    python benchmarks/bench_eval_cranfield.py --tune   # re-run the fusion grid on the tune half

The index is built once with the bundled MiniLM and cached under ``--cache-dir`` (keyed by the
corpus hash, embedder and chunk size). Chunks are up to 1,024 words, so every Cranfield abstract
(689 words at most) is ONE chunk and a retrieved chunk is a retrieved document, as in the
reference baselines of the dataset README. Each row is a policy under benchmarks/policies/.
Quality is reported on all queries and on a seeded half split: the ``--tune`` grid only ever
sees the tune half, so the held-out column of a tuned policy is an honest estimate.
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

from ragtiller.eval import EvalDataset, load_beir, run_eval, summarize
from ragtiller.eval.datasets import dataset_sha256, read_jsonl
from ragtiller.eval.honesty import check_degraded, without_deadlines
from ragtiller.eval.query_cache import QueryVectorCache
from ragtiller.graph.builder import build_graph
from ragtiller.index import ChunkingConfig, EmbeddedIndex
from ragtiller.ingest import ingest
from ragtiller.models import local_embedder
from ragtiller.policies import RetrievalPolicy, load_policy

HERE = Path(__file__).resolve().parent
POLICIES = [
    ("BM25 alone", "bm25.yaml"),
    ("dense alone (MiniLM)", "dense.yaml"),
    ("hybrid + RRF (k=60)", "hybrid_rrf.yaml"),
    ("hybrid + z-score fusion", "hybrid_zscore.yaml"),
    ("previous default policy, 2026-06-16 (sizes -> 100)", "previous_default_k100.yaml"),
    ("default policy, 2026-11-29 (sizes -> 100)", "default_k100.yaml"),
    ("hybrid + tuned fusion", "hybrid_tuned.yaml"),
]
CHUNK_TOKENS = 1024
REFERENCE_RRF_NDCG = 0.4222


def open_index(dataset: EvalDataset, cache_dir: Path) -> EmbeddedIndex:
    """The cached MiniLM index of the corpus (built on first use), checked to be 1 chunk/doc."""
    key = dataset_sha256([dataset.corpus_path])[:16]
    target = cache_dir / f"cranfield-minilm-c{CHUNK_TOKENS}-{key}"
    embedder = local_embedder()
    if (target / "manifest.json").is_file():
        index = EmbeddedIndex.load(target, embedder=embedder)
    else:
        started = time.perf_counter()
        chunking = ChunkingConfig(chunk_tokens=CHUNK_TOKENS)
        index = ingest([dataset.corpus_path], target, embedder=embedder, chunking=chunking)
        print(f"built index in {time.perf_counter() - started:.0f} s: {target}", file=sys.stderr)
    with_text = sum(
        1 for row in read_jsonl(dataset.corpus_path) if (row.get("title") or row.get("text"))
    )
    counts = index.manifest.counts
    if not counts.chunks == counts.sections == with_text:
        raise SystemExit(f"expected one chunk per non-empty document ({with_text}), got {counts}")
    return index


def evaluate(
    policy: RetrievalPolicy, index: EmbeddedIndex, dataset: EvalDataset, **graph: Any
) -> dict[str, Any]:
    """Overall NDCG@10, MRR@10, Recall@100 and p95 turn latency of ``policy`` on ``dataset``
    (as ``ragtiller eval``: deadlines lifted, a degraded turn is an error)."""
    run = run_eval(
        build_graph(without_deadlines(policy), index=index, **graph), dataset, progress=False
    )
    check_degraded(run, allow=False, what=f"{policy.policy_id} on {dataset.name}")
    overall = summarize(run, dataset)["all"]
    return {
        "ndcg": overall.ndcg_at_10,
        "mrr": overall.mrr_at_10,
        "r100": overall.recall_at_100,
        "p95": overall.latency_ms["total"].p95,
    }


def table(index: EmbeddedIndex, full: EvalDataset, halves: Sequence[EvalDataset]) -> None:
    """Print the Markdown table: one row per benchmark policy."""
    print(
        "| policy (benchmarks/policies/) | NDCG@10 | MRR@10 | Recall@100 "
        "| NDCG@10 tune half | NDCG@10 held-out half | p95 turn ms |"
    )
    print("|---|---|---|---|---|---|---|")
    for label, file in POLICIES:
        policy = load_policy(HERE / "policies" / file)
        m = evaluate(policy, index, full)
        tune, held = (evaluate(policy, index, half)["ndcg"] for half in halves)
        print(
            f"| {label} (`{file}`) | {m['ndcg']:.4f} | {m['mrr']:.4f} | {m['r100']:.4f} "
            f"| {tune:.4f} | {held:.4f} | {m['p95']:.0f} |"
        )
    print(f"\nreference (dataset README): RRF k=60, top 100 of each: NDCG@10 {REFERENCE_RRF_NDCG}")


def grid() -> list[dict[str, Any]]:
    """Fusion settings tried on the tune half: method, dense weight, candidate depth per tier."""
    methods: list[dict[str, Any]] = [{"method": "rrf", "rrf_k": k} for k in (10, 30, 60, 100)]
    methods += [{"method": "zscore"}, {"method": "minmax"}]
    return [
        {**m, "tier_weights": {"dense": w, "lexical": round(1 - w, 2)}, "tier_depth": depth}
        for m, w, depth in itertools.product(methods, (0.3, 0.4, 0.5, 0.6, 0.7), (100, 200))
    ]


def tune(index: EmbeddedIndex, tune_half: EvalDataset, held_out: EvalDataset) -> None:
    """Score every grid setting on the tune half; report the best one's held-out NDCG@10."""
    base = load_policy(HERE / "policies" / "hybrid_rrf.yaml")
    cached = QueryVectorCache(index.embedder)
    scored = []
    for fusion in grid():
        policy = base.model_copy(update={"fusion": base.fusion.model_copy(update=fusion)})
        ndcg = evaluate(policy, index, tune_half, embedder=cached)["ndcg"]
        scored.append((ndcg, fusion))
        print(f"tune NDCG@10 {ndcg:.4f}  {fusion}", file=sys.stderr)
    best_ndcg, best = max(scored, key=lambda s: s[0])
    policy = base.model_copy(update={"fusion": base.fusion.model_copy(update=best)})
    held = evaluate(policy, index, held_out, embedder=cached)["ndcg"]
    print(f"best on tune half: {best} tune NDCG@10 {best_ndcg:.4f}; held-out {held:.4f}")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", type=Path, default=Path("/work/shared/data/cranfield"))
    parser.add_argument(
        "--cache-dir", type=Path, default=Path(tempfile.gettempdir()) / "ragtiller-bench"
    )
    parser.add_argument("--seed", type=int, default=0, help="Seed of the tune/held-out split.")
    parser.add_argument("--tune", action="store_true", help="Run the fusion grid on the tune half.")
    args = parser.parse_args(argv)
    full = load_beir(args.dataset)
    halves = full.split_halves(seed=args.seed)
    index = open_index(full, args.cache_dir)
    print(
        f"{full.name}/{full.split}: {len(full.queries)} queries, sha256 {full.sha256[:12]}; "
        f"halves {len(halves[0].queries)}/{len(halves[1].queries)} (seed {args.seed}); "
        f"index: {index.manifest.counts.chunks} chunks = one per non-empty doc "
        f"(docs 471 and 995 are empty)"
    )
    if args.tune:
        tune(index, *halves)
    else:
        table(index, full, halves)


if __name__ == "__main__":
    main()
