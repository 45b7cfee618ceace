"""Lexical-only retrieval on Cranfield: bm25s (embedded) against BM25 sparse vectors in Pinecone.

Run on demand (not in CI; needs the ``pinecone`` extra and ``../shared/data/cranfield``):

    python benchmarks/bench_lexical_pinecone.py [--dataset DIR]

Pinecone is the loopback emulator of ``tests/fixtures/pinecone_emulator.py`` (a sparse index,
dot product over float32 values), reached through the real ``pinecone`` SDK: the figures measure
the encoding (tokenizer, statistics, weights), not Pinecone's service. Three parts:

1. NDCG@10 of ``benchmarks/policies/bm25.yaml`` through the serving graph, with the lexical tier
   served by bm25s and then by Pinecone (``lexical_backend: pinecone``, no fallback).
2. The two tiers side by side, query by query: top-10 lists equal, equal up to tied scores,
   and the largest relative score difference.
3. What stale statistics cost, against a full upsert: (a) the first half of the corpus upserted
   with the first half's statistics, then the second half added with ``only_ids`` (statistics
   of the whole corpus, first-half weights left with the old average length); (b) a replica that
   read the first half's statistics and still encodes queries with them after a full upsert
   (its ``stats_ttl_s`` not yet passed).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from pinecone import Pinecone

from ragtiller.core.tiers import SearchRequest
from ragtiller.eval import load_beir, run_eval, summarize
from ragtiller.eval.metrics import ndcg_at_k
from ragtiller.graph import tiers_for_policy
from ragtiller.graph.builder import build_graph
from ragtiller.index import ChunkingConfig, EmbeddedIndex
from ragtiller.ingest import build_index
from ragtiller.models import HashingEmbedder
from ragtiller.pinecone import PineconeLexicalTier, upsert_lexical
from ragtiller.policies import load_policy

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
from fixtures.pinecone_emulator import API_KEY, PineconeEmulator  # noqa: E402

K = 10


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default=str(HERE.parent.parent / "shared/data/cranfield"))
    args = parser.parse_args()
    dataset = load_beir(args.dataset)
    started = time.perf_counter()
    index = build_index(
        [dataset.corpus_path],
        embedder=HashingEmbedder(),
        chunking=ChunkingConfig(chunk_tokens=1024),
        progress=False,
    )
    print(f"index: {len(index.store.records)} chunks in {time.perf_counter() - started:.1f} s")
    bm25s_tier = next(t for t in index.tiers if t.name == "lexical")
    policy = load_policy(HERE / "policies" / "bm25.yaml")
    remote_policy = policy.model_copy(
        update={
            "lexical_backend": policy.lexical_backend.model_copy(
                update={"provider": "pinecone", "fallback": "none"}
            )
        }
    )
    with (
        PineconeEmulator(dimension=None) as emulator,
        Pinecone(api_key=API_KEY).Index(host=emulator.host) as remote,
    ):
        started = time.perf_counter()
        counts = upsert_lexical(remote, index)
        print(f"upsert_lexical: {counts} in {time.perf_counter() - started:.1f} s")
        env = {"PINECONE_API_KEY": API_KEY, "PINECONE_SPARSE_HOST": emulator.host}

        print("\n1. NDCG@10 through the graph (benchmarks/policies/bm25.yaml)")
        for label, chosen, tiers in (
            ("bm25s (embedded)", policy, index.tiers),
            ("Pinecone sparse", remote_policy, tiers_for_policy(remote_policy, index, env=env)),
        ):
            run = run_eval(build_graph(chosen, index=index, tiers=tiers), dataset, progress=False)
            overall = summarize(run, dataset)["all"]
            print(
                f"   {label:<18} NDCG@10 {overall.ndcg_at_10:.4f}  MRR@10 {overall.mrr_at_10:.4f}"
            )

        print("\n2. The tiers side by side, top 10 of each of the", len(dataset.queries), "queries")
        pinecone_tier = PineconeLexicalTier(remote, timeout_s=30.0)
        compare(dataset.queries, bm25s_tier, pinecone_tier)

    print("\n3. Stale statistics (first half of the corpus, then all of it)")
    stale(dataset, index)


def compare(queries: Any, reference: Any, candidate: Any) -> None:
    """Print how often the two tiers' top 10 agree, and their largest score difference."""
    same = tie_same = 0
    worst = 0.0
    for text in queries.values():
        a = reference.search(SearchRequest(query=text, vector=None, k=K))
        b = candidate.search(SearchRequest(query=text, vector=None, k=K))
        same += [h["id"] for h in a] == [h["id"] for h in b]
        tie_same += groups(a)[:-1] == groups(b)[:-1] and len(a) == len(b)
        for x, y in zip(a, b, strict=False):
            worst = max(worst, abs(x["score"] - y["score"]) / max(abs(x["score"]), 1e-12))
    n = len(queries)
    print(
        f"   identical top 10: {same}/{n}; identical up to the order of tied scores: {tie_same}/{n}"
    )
    print(f"   largest relative score difference at equal rank: {worst:.2e}")


def groups(hits: list[Any]) -> list[frozenset[str]]:
    """Hit ids grouped by score (equal within 1e-5 relative), best first."""
    out: list[tuple[float, set[str]]] = []
    for h in hits:
        if out and abs(h["score"] - out[-1][0]) <= 1e-5 * abs(out[-1][0]):
            out[-1][1].add(h["id"])
        else:
            out.append((h["score"], {h["id"]}))
    return [frozenset(ids) for _, ids in out]


def stale(dataset: Any, index: EmbeddedIndex) -> None:
    """NDCG@10 of a full upsert against a two-step upsert whose first half kept stale weights."""
    ids = list(index.store.records.ids)
    second = set(ids[len(ids) // 2 :])
    first_docs = [index.store.records.document(r) for r in range(len(ids) // 2)]
    results: dict[str, float] = {}
    labels = ("full upsert", "half, then the rest with only_ids", "replica on the half's stats")
    for label in labels:
        with (
            PineconeEmulator(dimension=None) as emulator,
            Pinecone(api_key=API_KEY).Index(host=emulator.host) as remote,
        ):
            tier = PineconeLexicalTier(remote, timeout_s=30.0, stats_ttl_s=3600.0)
            if label == labels[0]:
                upsert_lexical(remote, index)
            elif label == labels[1]:
                upsert_lexical(remote, first_docs, config=index.manifest.lexical)
                upsert_lexical(remote, index, only_ids=second)
            else:  # the replica read the statistics before the full upsert, within its TTL
                upsert_lexical(remote, first_docs, config=index.manifest.lexical)
                tier.encoder()
                upsert_lexical(remote, index)
            scores = []
            for qid, text in dataset.queries.items():
                ranking = [
                    h["doc_id"] for h in tier.search(SearchRequest(query=text, vector=None, k=K))
                ]
                score = ndcg_at_k(ranking, dataset.qrels[qid], K)
                if score is not None:
                    scores.append(score)
            results[label] = sum(scores) / len(scores)
            cost = results[label] - results[labels[0]]
            print(f"   {label:<34} NDCG@10 {results[label]:.4f} ({cost:+.4f})")


if __name__ == "__main__":
    main()
