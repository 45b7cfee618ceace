"""One scaling table: what a default turn, the exact-scan floor, the approximate tier, memory and
opening cost at 10k, 100k and 1M chunks.

Run on demand (not in CI; offline):

    python benchmarks/bench_scale.py [--sizes 10000 100000 1000000] [--turns 100]
                                     [--large-turns 30] [--queries 200]
                                     [--vector-dtype float32|float16]

Each index is synthetic but saved exactly as an ingest saves one (``EmbeddedIndex.save``: a
versioned directory with the vectors, the chunk and section tables, the chunk BM25 and what
:func:`ragtiller.index.embedded.build_derived` derives at ingest: section BM25, parent rows and,
from ``ANN_MIN_ROWS`` chunks, the HNSW graph). Built once and cached under
``$TMPDIR/ragtiller-bench-scale/`` (float16 indexes, ``--vector-dtype float16``, under
``$TMPDIR/ragtiller-bench-scale-float16/``), one per index format version. Chunks: 384-d unit
vectors clustered around ``rows / 100`` random topics (so nearest neighbours mean something, as
with real embeddings), 40 Zipf-drawn words each, four per section, ten sections per document,
two tenants. The embedder is the hashing embedder (offline); its query vectors are unrelated to
the synthetic vectors, which costs the same, so turns are timed with it and recall is measured with queries drawn around the
same topics as the chunks.

Every size is measured in a fresh process, one after another:

* **open**: ``open_index`` + ``build_graph`` (default policy) + the first ``graph.invoke``,
  wall clock and CPU (the files are in the page cache: the build just wrote them);
* **turn**: CPU time (all threads) of ``graph.invoke`` with the default policy, a broad query
  with a fresh word each time (no turn reuses another's scan); p50 and p95;
* **floor**: CPU of the exact scan alone: ``einsum`` of every vector with the query and an
  ``argpartition`` for the top 100;
* **dense**: CPU of one dense-tier search as the default turn runs it (exact below the graph's
  threshold, the graph above); **recall@10** of the dense tier against the exact scan
  (unfiltered, and with a tenant filter);
* **memory**: the resident memory (anonymous + file-backed) the process gained by opening the
  index and running the turns, per chunk, against the 1,536 raw bytes of a float32 vector; and
  the dense tier alone (vectors, graph, chunk table: ``NumpyVectorStore.load`` + the graph) in
  another fresh process.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

CACHE = Path(os.environ.get("TMPDIR", tempfile.gettempdir())) / "ragtiller-bench-scale"
DIM = 384
WORDS_PER_CHUNK = 40
CHILDREN_PER_PARENT = 4
PARENTS_PER_DOC = 10
QUERY = "how do I get started with asyncio tasks and the event loop, w{n}x?"
WORDS = ["asyncio", "task", "tasks", "event", "loop", "started", "coroutine", "await", "future"]


def rss() -> dict[str, float]:
    """This process's resident anonymous and file-backed memory, bytes."""
    out = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("RssAnon", "RssFile"):
            out[key] = float(value.split()[0]) * 1024
    return out


def centres(rows: int) -> np.ndarray:
    rng = np.random.default_rng(rows)
    return rng.standard_normal((max(rows // 100, 10), DIM), dtype=np.float32)


def around(topics: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    out = topics[rng.integers(0, len(topics), n)]
    out += 0.9 * rng.standard_normal((n, DIM), dtype=np.float32)
    out /= np.linalg.norm(out, axis=1, keepdims=True)
    return out


def cache(dtype: str) -> Path:
    return CACHE if dtype == "float32" else CACHE.with_name(f"{CACHE.name}-{dtype}")


def build(rows: int, dtype: str = "float32") -> tuple[Path, dict[str, float]]:
    """Build (once) and save the synthetic index of ``rows`` chunks; its build times."""
    from ragtiller.index import EmbeddedIndex, LexicalTier, NumpyVectorStore
    from ragtiller.index.embedded import build_derived
    from ragtiller.index.lexical import DEFAULT_LEXICAL
    from ragtiller.index.manifest import FORMAT_VERSION, EmbedderInfo, IndexCounts, IndexManifest
    from ragtiller.index.records import RecordTable
    from ragtiller.index.units import DEFAULT_CHUNKING
    from ragtiller.models import HashingEmbedder
    from ragtiller.models.embedders import embedder_identity

    path = cache(dtype) / f"index-{rows}-format{FORMAT_VERSION}"
    done = path / "built.json"
    if done.exists():
        return path, json.loads(done.read_text())
    rng = np.random.default_rng(rows + 1)
    vectors = around(centres(rows), rows, rng)
    vocab = np.array(WORDS + [f"w{i}x" for i in range(30_000)])
    texts: list[str] = []
    for first in range(0, rows, 100_000):  # in blocks: the rank matrix of 1M rows is 320 MB
        n = min(100_000, rows - first)
        ranks = np.minimum(rng.zipf(1.3, size=(n, WORDS_PER_CHUNK)), len(vocab)) - 1
        texts.extend(" ".join(row) for row in vocab[ranks])
    per_doc = CHILDREN_PER_PARENT * PARENTS_PER_DOC

    def doc(r: int) -> dict[str, Any]:
        d = r // per_doc
        return {
            "doc_id": f"docs/file-{d}.md",
            "source": f"/data/docs/file-{d}.md",
            "namespace": "default",
            "title": f"File {d}",
            "tenant": "acme" if d % 2 else "globex",
        }

    metadatas = [
        {
            **doc(r),
            "section_path": ["Guide", f"Part {r // CHILDREN_PER_PARENT}"],
            "parent_id": f"p{r // CHILDREN_PER_PARENT:09d}",
            "start": (r % CHILDREN_PER_PARENT) * 300,
            "end": (r % CHILDREN_PER_PARENT) * 300 + 290,
        }
        for r in range(rows)
    ]
    embedder = HashingEmbedder(DIM)
    store = NumpyVectorStore.from_vectors(
        texts,
        vectors,
        embedder,
        metadatas,
        ids=[f"c{r:09d}" for r in range(rows)],
        dtype=dtype,  # type: ignore[arg-type]
    )
    del vectors
    n_parents = rows // CHILDREN_PER_PARENT
    parents = RecordTable(
        [f"p{p:09d}" for p in range(n_parents)],
        [
            " ".join(texts[p * CHILDREN_PER_PARENT : (p + 1) * CHILDREN_PER_PARENT])
            for p in range(n_parents)
        ],
        [
            {**doc(p * CHILDREN_PER_PARENT), "section_path": ["Guide", f"Part {p}"], "start": 0}
            for p in range(n_parents)
        ],
    )
    times: dict[str, float] = {}
    started = time.perf_counter()
    lexical = LexicalTier.build(
        store.records, [f"{md['title']} {t}" for t, md in zip(texts, metadatas, strict=True)]
    )
    times["chunk_bm25_s"] = time.perf_counter() - started
    started = time.perf_counter()
    derived = build_derived(store, parents, DEFAULT_LEXICAL)
    times["derived_s"] = time.perf_counter() - started
    name, dimension = embedder_identity(embedder)
    manifest = IndexManifest(
        embedder=EmbedderInfo(name=name, dimension=dimension),
        chunking=DEFAULT_CHUNKING,
        lexical=DEFAULT_LEXICAL,
        counts=IndexCounts(documents=rows // per_doc + 1, sections=n_parents, chunks=rows),
        namespaces=store.records.namespaces,
        tenanted=False,
        vector_dtype=dtype,  # type: ignore[arg-type]
    )
    index = EmbeddedIndex(
        store=store,
        parents=parents,
        lexical=lexical,
        manifest=manifest,
        corpus_map=f"{rows // per_doc} synthetic documents",
        derived=derived,
    )
    started = time.perf_counter()
    index.save(path)
    times["save_s"] = time.perf_counter() - started
    times["graph"] = float(derived.ann is not None)
    done.write_text(json.dumps(times))
    return path, times


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q))


def probe(directory: str, rows: int, turns: int, queries: int) -> dict[str, Any]:
    """Child process: open, turns, floor, recall and memory of one index."""
    from ragtiller import build_graph
    from ragtiller.core.tiers import SearchRequest
    from ragtiller.index import open_index
    from ragtiller.policies import load_policy

    counter = itertools.count()
    warm_up()  # the modules a turn imports are not the index's memory
    before = rss()
    wall, cpu = time.perf_counter(), time.process_time()
    index = open_index(directory)
    # the turns name no tenant: an operator's graph over both tenants, as before tenanted
    # indexes refused unscoped turns
    graph = build_graph(index=index, require_tenant=False)
    policy = load_policy(None)
    graph.invoke({"query": QUERY.format(n=next(counter))})
    out: dict[str, Any] = {
        "open_wall_s": time.perf_counter() - wall,
        "open_cpu_s": time.process_time() - cpu,
    }
    graphs = {"default": graph}
    searches = ["auto", "exact"] if index.store.ann is not None else ["auto"]
    for search in searches:
        for feedback in ("rocchio", "off"):
            name = f"{search}_{feedback}"
            if name != "auto_rocchio":
                variant = policy.model_copy(
                    update={
                        "feedback": policy.feedback.model_copy(update={"dense": feedback}),
                        "dense_backend": policy.dense_backend.model_copy(update={"search": search}),
                    }
                )
                graphs[name] = build_graph(variant, index=index, require_tenant=False)
                graphs[name].invoke({"query": QUERY.format(n=next(counter))})
    turn_cpu: dict[str, list[float]] = {name: [] for name in graphs}
    for _ in range(turns):  # in turn, so that drift on a shared machine hits all alike
        for name, g in graphs.items():
            started = time.process_time()
            g.invoke({"query": QUERY.format(n=next(counter))})
            turn_cpu[name].append((time.process_time() - started) * 1000)
    after = rss()
    out["turn_cpu_p50_ms"] = percentile(turn_cpu["default"], 50)
    out["turn_cpu_p95_ms"] = percentile(turn_cpu["default"], 95)
    out["turns_cpu_p50_ms"] = {name: percentile(t, 50) for name, t in turn_cpu.items()}
    out["rss_per_chunk"] = sum(after.values()) - sum(before.values())
    out["rss_per_chunk"] /= rows
    store = index.store
    vectors = np.asarray(store.vectors, dtype=np.float32)  # the floor is a float32 scan
    rng = np.random.default_rng(7)
    qs = around(centres(rows), queries, rng)
    floor = []
    for q in qs:
        started = time.process_time()
        scores = np.einsum("ij,j->i", vectors, q)
        np.argpartition(-scores, 100)[:100]
        floor.append((time.process_time() - started) * 1000)
    out["floor_cpu_p50_ms"] = percentile(floor, 50)
    dense = next(t for t in graph_tiers(index) if t.name == "dense")
    approximate = bool(getattr(dense, "approximate", False))
    out["approximate"] = approximate
    dense_cpu = []
    for q in qs:
        started = time.process_time()
        dense.search(SearchRequest(query="", vector=q.tolist(), k=100))
        dense_cpu.append((time.process_time() - started) * 1000)
    out["dense_cpu_p50_ms"] = percentile(dense_cpu, 50)
    out["feedback"] = feedback_cost(index, around(centres(rows), 3 * queries, rng))
    for label, scope in (("recall", None), ("recall_tenant", {"tenant": "acme"})):
        found = 0
        for q in qs:
            got = store.search_rows(q.tolist(), 10, filter=scope, approximate=approximate)
            exact = store.search_rows(q.tolist(), 10, filter=scope)
            found += len({r for r, _ in got} & {r for r, _ in exact})
        out[label] = found / (10 * len(qs))
    return out


def feedback_cost(index: Any, qs: np.ndarray) -> dict[str, float]:
    """CPU ms (p50) of one dense search at k 100, alone and as Rocchio's second pass
    (``DenseTier.search_moved``: the question's 1,000 nearest chunks re-scored), exact and,
    where the index has a graph, on the graph. Each path gets its own queries: none reuses
    another's scan."""
    from ragtiller.core.tiers import SearchRequest
    from ragtiller.index import DenseTier

    modes = [False] + ([True] if index.store.ann is not None else [])
    out: dict[str, float] = {}
    for approximate in modes:
        dense = DenseTier(index.store, approximate=approximate)
        for name, block in zip(("plain", "moved"), np.array_split(qs, 2), strict=True):
            times = []
            for q in block:
                request = SearchRequest(query="", vector=q.tolist(), k=100)
                moved = (q + np.roll(q, 1)).tolist()
                started = time.process_time()
                if name == "plain":
                    dense.search(request)
                else:
                    dense.search_moved(request, moved)
                times.append((time.process_time() - started) * 1000)
            out[f"{'hnsw' if approximate else 'exact'}_{name}_ms"] = percentile(times, 50)
    return out


def warm_up() -> None:
    """One turn over a tiny in-memory index: imports what a turn needs."""
    from langchain_core.documents import Document

    from ragtiller import build_graph
    from ragtiller.ingest import build_index
    from ragtiller.models import HashingEmbedder

    docs = [
        Document(page_content=f"# T {i}\n\nasyncio task {i}", metadata={"source": f"{i}"})
        for i in range(3)
    ]
    tiny = build_index(docs, embedder=HashingEmbedder(DIM), progress=False)
    build_graph(index=tiny).invoke({"query": "asyncio task"})


def graph_tiers(index: Any) -> list[Any]:
    """The default policy's tiers over the index, as ``build_graph`` chooses them (exact or
    approximate), without Rocchio's wrapper: the dense search a turn makes."""
    from ragtiller.policies import load_policy
    from ragtiller.ranking.query_tiers import apply_query_options

    policy = load_policy(None)
    plain = policy.model_copy(
        update={"feedback": policy.feedback.model_copy(update={"dense": "off"})}
    )
    return apply_query_options(plain, index.tiers, index)


def dense_memory(directory: str, rows: int) -> dict[str, float]:
    """Child process: memory of the dense tier alone (vectors, graph, chunk table), searched."""
    from ragtiller.index import NumpyVectorStore
    from ragtiller.index.ann import AnnIndex, load_graph
    from ragtiller.index.embedded import read_manifest
    from ragtiller.index.versions import current_version
    from ragtiller.models import HashingEmbedder

    version = current_version(Path(directory))
    dtype = read_manifest(version / "manifest.json").vector_dtype
    warm = NumpyVectorStore.from_vectors(["a", "b"], np.eye(2, DIM), HashingEmbedder(DIM))
    warm.attach_ann(AnnIndex.build(warm.vectors))
    warm.search_rows([1.0] * DIM, 1, approximate=True)  # faiss' code pages are not the index
    before = rss()
    graph = load_graph(version, rows, DIM, dtype)  # as EmbeddedIndex.load opens them
    vectors = None if graph is None else graph.vectors()
    store = NumpyVectorStore.load(version, HashingEmbedder(DIM), vectors=vectors, dtype=dtype)
    if graph is not None:
        store.attach_ann(graph)
    qs = around(centres(rows), 50, np.random.default_rng(8))
    for q in qs:
        store.search_rows(q.tolist(), 100, approximate=store.ann is not None)
    after = rss()
    return {k: (after[k] - before[k]) / rows for k in after}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--large-turns", type=int, default=30, help="turns at 1M chunks and up")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--vector-dtype", choices=["float32", "float16"], default="float32")
    parser.add_argument("--probe", nargs=4, help=argparse.SUPPRESS)
    parser.add_argument("--dense-probe", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.probe:
        directory, rows, turns, queries = args.probe
        print(json.dumps(probe(directory, int(rows), int(turns), int(queries))))
        return
    if args.dense_probe:
        print(json.dumps(dense_memory(args.dense_probe[0], int(args.dense_probe[1]))))
        return
    print(f"load average at start: {os.getloadavg()[0]:.1f}; vectors {args.vector_dtype}")
    results = []
    for rows in args.sizes:
        started = time.perf_counter()
        path, times = build(rows, args.vector_dtype)
        print(f"{rows:,} chunks: index ready in {time.perf_counter() - started:.1f} s {times}")
        turns = args.large_turns if rows >= 1_000_000 else args.turns
        queries = min(args.queries, 50) if rows >= 1_000_000 else args.queries
        measured = json.loads(run("--probe", str(path), str(rows), str(turns), str(queries)))
        measured["dense_memory"] = json.loads(run("--dense-probe", str(path), str(rows)))
        measured.update(rows=rows, turns=turns, queries=queries, **times)
        print(json.dumps(measured))
        results.append(measured)
    print(f"load average at end: {os.getloadavg()[0]:.1f}\n")
    print(
        "| chunks | dense search | turn CPU p50 ms | p95 ms | exact-scan floor ms | dense "
        "search CPU ms | recall@10 (tenant filter) | memory B/chunk, whole index (x raw) | "
        "dense tier B/chunk (x raw) | open + build_graph + first turn s (CPU s) |"
    )
    print("|---:|---|---:|---:|---:|---:|---|---:|---:|---:|")
    table_rows = []
    raw = DIM * 4
    for m in results:
        dense = sum(m["dense_memory"].values())
        print(
            f"| {m['rows']:,} | {'HNSW' if m['approximate'] else 'exact'} "
            f"| {m['turn_cpu_p50_ms']:.1f} | {m['turn_cpu_p95_ms']:.1f} "
            f"| {m['floor_cpu_p50_ms']:.2f} | {m['dense_cpu_p50_ms']:.2f} "
            f"| {m['recall']:.3f} ({m['recall_tenant']:.3f}) "
            f"| {m['rss_per_chunk']:.0f} ({m['rss_per_chunk'] / raw:.2f}x) "
            f"| {dense:.0f} ({dense / raw:.2f}x) "
            f"| {m['open_wall_s']:.2f} ({m['open_cpu_s']:.2f}) |"
        )
        fb = m["feedback"]
        for mode in ("exact", "hnsw"):
            if f"{mode}_plain_ms" in fb:
                plain = fb[f"{mode}_plain_ms"]
                cells = [
                    f"{fb[k]:.2f} (+{(fb[k] - plain) / plain:.0%})"
                    for k in (f"{mode}_moved_ms",)
                    if k in fb
                ]
                table_rows.append(f"| {m['rows']:,} | {mode} | {plain:.2f} | " + " | ".join(cells))
    print(
        "\n| chunks | dense search | turn CPU p50 ms, Rocchio (default) | feedback off | "
        "feedback's cost, ms | exact dense search alone, ms | cost / exact search |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|")
    for m in results:
        exact_search = m["feedback"]["exact_plain_ms"]
        for search in ("auto", "exact"):
            turn = m["turns_cpu_p50_ms"].get(f"{search}_rocchio", m["turn_cpu_p50_ms"])
            off = m["turns_cpu_p50_ms"].get(f"{search}_off")
            if off is None:
                continue
            kind = "HNSW" if search == "auto" and m["approximate"] else "exact"
            print(
                f"| {m['rows']:,} | {kind} | {turn:.1f} | {off:.1f} | {turn - off:+.1f} "
                f"| {exact_search:.2f} | {(turn - off) / exact_search:+.0%} |"
            )
    print("\n| chunks | dense search | alone ms | under Rocchio ms (feedback's share) |")
    print("|---:|---|---:|---:|")
    for line in table_rows:
        print(line)


def run(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, __file__, *args], check=True, capture_output=True, text=True
    )
    return done.stdout.strip().splitlines()[-1]


if __name__ == "__main__":
    main()
