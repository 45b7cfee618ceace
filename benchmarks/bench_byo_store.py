"""Bring your own store: the adapters' overhead, and the quality of a LangChain store as a tier.

Run on demand (not in CI; the quality part needs the bundled MiniLM and the shared data):

    python benchmarks/bench_byo_store.py --overhead                     # adapter vs store, p50
    python benchmarks/bench_byo_store.py --quality --index-dir /work/idx   # NDCG@10 and more

``--overhead``: one tier search through the adapter (``VectorStoreTier.search``,
``RetrieverTier.search``) against the same call made on the store directly, in one process,
alternating, over 2,000 stdlib chunks (64-dim hashing vectors, k = 36, the default policy's
tier depth), without and with a tenant filter. The adapter's extra work is the scope
translation, the per-hit scope check and the Hit conversion.

``--quality``: ``ragtiller eval``'s path (deadlines lifted, a degraded turn is an error, every
route returning 100) over each collection's index, as ``ragtiller ingest corpus.jsonl`` builds
it (``--index-dir/<name>``, built there when missing). Rows: the embedded default; the same
policy with LangChain's ``InMemoryVectorStore`` (the index's own chunk vectors, cosine) as the
dense tier and ragtiller's BM25 as the lexical one; and the embedded dense + BM25 tiers with
Rocchio off, the like-for-like reference (Rocchio and the parent-child tier read embedded
tiers only, so a foreign store goes without them).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import InMemoryVectorStore

from ragtiller.adapters import RetrieverTier, VectorStoreTier
from ragtiller.core.tiers import SearchRequest, Tier
from ragtiller.eval import load_beir, run_eval, summarize
from ragtiller.eval.honesty import check_degraded, without_deadlines
from ragtiller.eval.runner import QueryVectorCache
from ragtiller.eval.variants import with_depth, with_overrides
from ragtiller.graph.builder import build_graph
from ragtiller.index import EmbeddedIndex, open_index
from ragtiller.index.versions import is_index_directory
from ragtiller.ingest import ingest
from ragtiller.models import HashingEmbedder, local_embedder
from ragtiller.policies import RetrievalPolicy, load_policy

DATA = Path("/work/shared/data")
DEPTH = 100


def p50_us(fn: Callable[[], Any], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter_ns()
        fn()
        times.append(time.perf_counter_ns() - started)
    return statistics.median(times) / 1000


def overhead(repeats: int) -> None:
    """Adapter vs direct call, p50 microseconds, alternating so both see the same machine."""
    from langchain_chroma import Chroma
    from langchain_community.retrievers import BM25Retriever

    from ragtiller.ingest import stdlib_documents
    from ragtiller.ingest.to_store import chunk_sources

    emb = HashingEmbedder(dim=64)
    docs = chunk_sources(stdlib_documents(max_docs=700))[:2000]
    for i, d in enumerate(docs):
        d.metadata["tenant"] = ("acme", "globex")[i % 2]
    memory = InMemoryVectorStore(emb)
    memory.add_documents(docs)
    import tempfile

    chroma = Chroma("bench", embedding_function=emb, persist_directory=tempfile.mkdtemp())
    for first in range(0, len(docs), 500):
        batch = docs[first : first + 500]
        chroma.add_documents(batch, ids=[str(d.id) for d in batch])
    bm25 = BM25Retriever.from_documents(docs, k=36)
    text = "cancel a running task with a timeout"
    vector = emb.embed_query(text)
    k = 36
    print(f"\n{len(docs)} chunks, k = {k}, p50 of {repeats} calls each (microseconds)\n")
    print("| store | filter | direct call | through the adapter | overhead |")
    print("|---|---|---|---|---|")
    cases: list[tuple[str, str, Callable[[], Any], Tier, SearchRequest]] = []
    for tenant in (None, "acme"):
        scope: dict[str, Any] = {"filter": {"tenant": tenant}} if tenant else {}
        req = SearchRequest(query=text, vector=vector, k=k, **scope)
        label = "tenant" if tenant else "none"
        pred = (lambda d: d.metadata.get("tenant") == "acme") if tenant else None
        cases.append(
            (
                "InMemoryVectorStore",
                label,
                lambda pred=pred: memory.similarity_search_with_score_by_vector(
                    vector, k=k, filter=pred
                ),
                VectorStoreTier(memory),
                req,
            )
        )
        where = {"tenant": {"$eq": tenant}} if tenant else None
        cases.append(
            (
                "Chroma (embedded)",
                label,
                lambda where=where: chroma.similarity_search_by_vector_with_relevance_scores(
                    vector, k=k, filter=where
                ),
                VectorStoreTier(chroma),
                req,
            )
        )
    req = SearchRequest(query=text, vector=None, k=k)
    cases.append(("BM25Retriever", "none", lambda: bm25.invoke(text), RetrieverTier(bm25), req))
    for store, label, direct, tier, req in cases:
        direct()
        tier.search(req)  # warm both
        d_times, a_times = [], []
        for _ in range(repeats):
            d_times.append(p50_us(direct, 1))
            a_times.append(p50_us(lambda tier=tier, req=req: tier.search(req), 1))
        d, a = statistics.median(d_times), statistics.median(a_times)
        print(f"| {store} | {label} | {d:,.0f} | {a:,.0f} | {a - d:+,.0f} ({(a - d) / d:+.1%}) |")


class Precomputed(Embeddings):
    """The index's own chunk vectors, by text, so the store holds exactly what the index does."""

    def __init__(self, vectors: dict[str, list[float]]) -> None:
        self.vectors = vectors

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self.vectors[t] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        raise NotImplementedError("the graph embeds queries with the index's embedder")


def memory_tier(index: EmbeddedIndex) -> VectorStoreTier:
    store = index.store
    texts = list(store.records.texts)
    vectors = {t: list(map(float, v)) for t, v in zip(texts, store.vectors, strict=True)}
    memory = InMemoryVectorStore(Precomputed(vectors))
    memory.add_documents(index.documents())
    return VectorStoreTier(memory)


def open_or_build(name: str, index_dir: Path) -> EmbeddedIndex:
    target = index_dir / name
    if not is_index_directory(target):
        ingest([DATA / name / "corpus.jsonl"], target, embedder=local_embedder(), progress=False)
    return open_index(target)


def evaluate(
    policy: RetrievalPolicy, dataset: Any, embedder: Embeddings, **parts: Any
) -> dict[str, float]:
    graph = build_graph(without_deadlines(policy), require_tenant=False, embedder=embedder, **parts)
    started = time.perf_counter()
    run = run_eval(graph, dataset, progress=False, concurrency=4)
    check_degraded(run, allow=False, what=policy.policy_id)
    m = summarize(run, dataset)["all"]
    return {
        "ndcg": m.ndcg_at_10 or 0.0,
        "mrr": m.mrr_at_10 or 0.0,
        "r100": m.recall_at_100 or 0.0,
        "p50": m.latency_ms["total"].p50 or 0.0,
        "s": time.perf_counter() - started,
    }


def quality(names: Sequence[str], index_dir: Path) -> None:
    policy = with_depth(load_policy("default"), DEPTH)
    no_rocchio = with_overrides(policy, {"feedback.dense_weight": 0.0})
    for name in names:
        index = open_or_build(name, index_dir)
        dataset = load_beir(DATA / name)
        emb = QueryVectorCache(index.embedder)
        lexical = next(t for t in index.tiers if t.name == "lexical")
        dense = next(t for t in index.tiers if t.name == "dense")
        rows = [
            ("embedded default (index=...)", policy, {"index": index}),
            (
                "InMemoryVectorStore + ragtiller BM25",
                policy,
                {"index": index, "tiers": [memory_tier(index), lexical]},
            ),
            (
                "embedded dense + BM25, Rocchio off (like for like)",
                no_rocchio,
                {"index": index, "tiers": [dense, lexical]},
            ),
        ]
        print(
            f"\n### {name}: {len(dataset.queries)} judged queries, {len(index.documents())} chunks\n"
        )
        print("| row | NDCG@10 | MRR@10 | Recall@100 | turn p50 ms |")
        print("|---|---|---|---|---|")
        for label, pol, parts in rows:
            m = evaluate(pol, dataset, emb, **parts)
            print(
                f"| {label} | {m['ndcg']:.4f} | {m['mrr']:.4f} | {m['r100']:.4f} | {m['p50']:.1f} |"
            )
            print(f"{label}: {m['s']:.0f} s", file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--overhead", action="store_true")
    parser.add_argument("--quality", action="store_true")
    parser.add_argument("--repeats", type=int, default=300)
    parser.add_argument("--index-dir", type=Path, default=Path("/tmp/rq"))
    parser.add_argument("--collections", nargs="+", default=["cranfield", "cacm"])
    args = parser.parse_args()
    if not (args.overhead or args.quality):
        parser.error("say --overhead, --quality or both")
    if args.overhead:
        overhead(args.repeats)
    if args.quality:
        quality(args.collections, args.index_dir)


if __name__ == "__main__":
    main()
