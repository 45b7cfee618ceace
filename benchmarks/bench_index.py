"""The embedded index: ingest throughput, tier latency at 10k/100k chunks, and memory.

Run on demand (not in CI):

    python benchmarks/bench_index.py [--ingest-docs 400] [--sizes 10000 100000] [--queries 200]

* ingest: the bundled all-MiniLM-L6-v2 on the first ``--ingest-docs`` stdlib-corpus documents
  (model load excluded), in chunks per second, end to end and embedding only;
* dense / parent-child: random unit vectors (384-d) with chunk-like metadata, ``k=10``;
* lexical: BM25 over synthetic Zipf-distributed text (120 words per chunk), 3-word queries;
* memory: peak RSS of this process (``resource.getrusage``), and the RSS a freshly loaded dense
  index adds after every vector page has been searched, measured in a clean child process and
  compared with the raw vector bytes (rows x 384 x 4).

Goals: dense exact 100k x 384 under 20 ms p50 on 2 cores; index RSS under 2x the raw vector bytes.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ragtiller.core.tiers import SearchRequest
from ragtiller.index import DenseTier, LexicalTier, NumpyVectorStore, ParentChildTier
from ragtiller.index.records import RecordTable
from ragtiller.ingest import build_index, stdlib_documents
from ragtiller.models import HashingEmbedder, local_embedder

DIM = 384
K = 10
CHILDREN_PER_PARENT = 4


def rss_mb() -> float:
    """Current resident set size of this process, in MiB (Linux ``/proc``)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far, in MiB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def latency_ms(search: Callable[[int], Any], queries: int) -> tuple[float, float]:
    """p50 and p95 of ``search(i)`` over ``queries`` calls after 10 warm-ups, in milliseconds."""
    for i in range(10):
        search(i)
    times = []
    for i in range(queries):
        started = time.perf_counter()
        search(i)
        times.append((time.perf_counter() - started) * 1000)
    cuts = statistics.quantiles(times, n=20)
    return statistics.median(times), cuts[18]


def chunk_metadata(rows: int) -> list[dict[str, Any]]:
    """Metadata shaped like what ingest stores for each child chunk."""
    return [
        {
            "doc_id": f"docs/file-{r // 40}.md",
            "source": f"/data/docs/file-{r // 40}.md",
            "namespace": "default",
            "title": None,
            "section_path": ["Guide", f"Part {r // CHILDREN_PER_PARENT}"],
            "parent_id": f"p{r // CHILDREN_PER_PARENT:015d}",
            "start": 0,
            "end": 900,
        }
        for r in range(rows)
    ]


def synthetic_texts(rows: int, words: int, rng: np.random.Generator) -> list[str]:
    """Zipf-distributed pseudo-words (a 30k vocabulary), ``words`` per text."""
    vocab = np.array([f"w{i}x" for i in range(30_000)])
    ranks = np.minimum(rng.zipf(1.2, size=(rows, words)), len(vocab)) - 1
    return [" ".join(row) for row in vocab[ranks]]


def dense_store(rows: int, rng: np.random.Generator) -> NumpyVectorStore:
    vectors = rng.standard_normal((rows, DIM), dtype=np.float32)
    texts = [f"chunk {r}" for r in range(rows)]
    ids = [f"c{r:015d}" for r in range(rows)]
    return NumpyVectorStore.from_vectors(
        texts, vectors, HashingEmbedder(DIM), chunk_metadata(rows), ids=ids
    )


def bench_ingest(docs: int) -> dict[str, float]:
    embedder = local_embedder()
    embedder.embed_query("load the model before timing")
    corpus = stdlib_documents(max_docs=docs)
    started = time.perf_counter()
    index = build_index(corpus, embedder=embedder, progress=False)
    seconds = time.perf_counter() - started
    chunks = index.manifest.counts.chunks
    return {
        "documents": docs,
        "chunks": chunks,
        "seconds": seconds,
        "chunks_per_s": chunks / seconds,
    }


def bench_tiers(rows: int, queries: int, rng: np.random.Generator) -> dict[str, Any]:
    store = dense_store(rows, rng)
    parents = RecordTable(
        [f"p{p:015d}" for p in range(rows // CHILDREN_PER_PARENT + 1)],
        ["parent text"] * (rows // CHILDREN_PER_PARENT + 1),
        [{"doc_id": "d", "source": "s"}] * (rows // CHILDREN_PER_PARENT + 1),
    )
    qvecs = rng.standard_normal((queries + 10, DIM), dtype=np.float32).tolist()
    dense, parent_child = DenseTier(store), ParentChildTier(store, parents)
    out: dict[str, Any] = {"rows": rows}
    out["dense"] = latency_ms(
        lambda i: dense.search(SearchRequest(query="", vector=qvecs[i], k=K)), queries
    )
    out["parent_child"] = latency_ms(
        lambda i: parent_child.search(SearchRequest(query="", vector=qvecs[i], k=K)), queries
    )
    texts = synthetic_texts(rows, 120, rng)
    started = time.perf_counter()
    lexical = LexicalTier.build(store.records, texts)
    out["bm25_build_s"] = time.perf_counter() - started
    words = [t.split() for t in texts[: queries + 10]]
    qtexts = [" ".join(w[j] for j in (3, 40, 90)) for w in words]
    out["lexical"] = latency_ms(
        lambda i: lexical.search(SearchRequest(query=qtexts[i], vector=None, k=K)), queries
    )
    return out


def index_rss(rows: int, rng: np.random.Generator) -> tuple[float, float]:
    """RSS added by loading a saved dense index and scanning every vector, and the raw bytes (MiB)."""
    with tempfile.TemporaryDirectory() as tmp:
        dense_store(rows, rng).save(tmp)
        probe = subprocess.run(
            [sys.executable, __file__, "--rss-probe", tmp],
            check=True,
            capture_output=True,
            text=True,
        )
    return float(probe.stdout.strip()), rows * DIM * 4 / 2**20


def rss_probe(directory: str) -> None:
    """Child process: print the RSS (MiB) a loaded, fully searched dense index adds."""
    before = rss_mb()
    store = NumpyVectorStore.load(directory, HashingEmbedder(DIM))
    tier = DenseTier(store)
    for _ in range(3):
        tier.search(SearchRequest(query="", vector=[1.0] * DIM, k=K))
    print(rss_mb() - before)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ingest-docs", type=int, default=400)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--rss-probe", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rss_probe:
        rss_probe(args.rss_probe)
        return

    rng = np.random.default_rng(0)
    print(
        f"python {platform.python_version()}, numpy {np.__version__}, {os.cpu_count()} CPUs, "
        f"load average {os.getloadavg()[0]:.1f} at start\n"
    )
    if args.ingest_docs:
        ing = bench_ingest(args.ingest_docs)
        print(
            f"ingest (MiniLM, stdlib slice): {ing['documents']} docs -> {ing['chunks']} chunks in "
            f"{ing['seconds']:.1f} s = {ing['chunks_per_s']:.1f} chunks/s\n"
        )
    print("| chunks | tier | p50 ms | p95 ms |")
    print("|---:|---|---:|---:|")
    builds = []
    for rows in args.sizes:
        result = bench_tiers(rows, args.queries, rng)
        for name in ("dense", "parent_child", "lexical"):
            p50, p95 = result[name]
            print(f"| {rows:,} | {name} | {p50:.2f} | {p95:.2f} |")
        builds.append((rows, result["bm25_build_s"]))
    print()
    for rows, seconds in builds:
        print(f"BM25 build, {rows:,} chunks x 120 words: {seconds:.1f} s")
    for rows in args.sizes:
        added, raw = index_rss(rows, rng)
        print(
            f"dense index RSS at {rows:,} chunks: {added:.0f} MiB for {raw:.0f} MiB of raw vectors "
            f"= {added / raw:.2f}x"
        )
    print(f"peak RSS of this run: {peak_rss_mb():.0f} MiB")
    print(f"load average at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
