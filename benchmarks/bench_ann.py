"""Which HNSW library serves the approximate dense tier, and from what size it pays.

Run on demand (not in CI):

    python benchmarks/bench_ann.py [--rows 100000] [--queries 200] [--libraries faiss usearch hnswlib]
                                   [--threshold-sizes 10000 25000 50000 100000]

Vectors are synthetic but clustered as embeddings are: ``rows / 100`` random topic centres in
384 dimensions, each vector a centre plus Gaussian noise, unit length; queries are drawn the same
way (uniform random vectors in 384-d have no meaningful neighbours: every library scores under
0.5 recall@10 on them at any affordable setting, and so would any real index). For each library
installed: build time on all cores, CPU per single-query search on one thread, recall@10 against
the exact top 10, and the bytes per vector of the saved index (vectors plus graph). hnswlib and
usearch are optional (``pip install hnswlib usearch``); a library that does not import is
reported as such.

``--saved-index DIR --rows N`` instead sweeps the search width over the graph an index of
``bench_scale.py`` saved (its topics, 40 queries): how recall@10 grows with efSearch.

The second table is the exact-scan floor (``einsum`` + ``argpartition``, as the exact tier
scans) against faiss HNSW at each size: where ``ANN_MIN_ROWS`` comes from.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

DIM = 384
K = 10
EFS = (64, 128)
M = 32


def clustered(rows: int, queries: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``rows`` data vectors and ``queries`` query vectors around the same random topics."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((max(rows // 100, 10), DIM), dtype=np.float32)

    def draw(n: int) -> np.ndarray:
        out = centres[rng.integers(0, len(centres), n)]
        out += 0.9 * rng.standard_normal((n, DIM), dtype=np.float32)
        out /= np.linalg.norm(out, axis=1, keepdims=True)
        return out

    return draw(rows), draw(queries)


def exact_top(data: np.ndarray, queries: np.ndarray) -> list[set[int]]:
    return [set(np.argpartition(-(data @ q), K)[:K].tolist()) for q in queries]


def cpu_ms(fn: Callable[[np.ndarray], Any], queries: np.ndarray) -> tuple[float, list[Any]]:
    """Median CPU milliseconds of ``fn(query)`` over the queries, and the results."""
    times, results = [], []
    for q in queries:
        started = time.process_time()
        results.append(fn(q))
        times.append((time.process_time() - started) * 1000)
    return statistics.median(times), results


def build_faiss(data: np.ndarray, path: Path) -> Callable[[int], Callable[[np.ndarray], Any]]:
    import faiss

    faiss.omp_set_num_threads(os.cpu_count() or 1)
    index = faiss.IndexHNSWFlat(DIM, M, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = 40
    index.add(data)
    faiss.write_index(index, str(path))
    faiss.omp_set_num_threads(1)

    def at(ef: int) -> Callable[[np.ndarray], Any]:
        params = faiss.SearchParametersHNSW()
        params.efSearch = ef
        return lambda q: index.search(q[None], K, params=params)[1][0]

    return at


def build_usearch(data: np.ndarray, path: Path) -> Callable[[int], Callable[[np.ndarray], Any]]:
    from usearch.index import Index

    index = Index(ndim=DIM, metric="ip", dtype="f32", connectivity=M // 2, expansion_add=128)
    index.add(np.arange(len(data)), data, threads=os.cpu_count() or 1)
    index.save(str(path))

    def at(ef: int) -> Callable[[np.ndarray], Any]:
        def search(q: np.ndarray) -> Any:
            index.expansion_search = ef
            return index.search(q, K, threads=1).keys

        return search

    return at


def build_hnswlib(data: np.ndarray, path: Path) -> Callable[[int], Callable[[np.ndarray], Any]]:
    import hnswlib

    index = hnswlib.Index(space="ip", dim=DIM)
    index.init_index(max_elements=len(data), M=M // 2, ef_construction=100)
    index.add_items(data, num_threads=os.cpu_count() or 1)
    index.save_index(str(path))
    index.set_num_threads(1)

    def at(ef: int) -> Callable[[np.ndarray], Any]:
        def search(q: np.ndarray) -> Any:
            index.set_ef(max(ef, K))
            return index.knn_query(q, K)[0][0]

        return search

    return at


BUILDERS = {"faiss": build_faiss, "usearch": build_usearch, "hnswlib": build_hnswlib}


def compare(rows: int, queries: int, libraries: list[str]) -> None:
    data, qs = clustered(rows, queries)
    truth = exact_top(data, qs)
    print(f"\n{rows:,} clustered 384-d vectors, {queries} queries, recall@{K} against exact")
    print(
        "| library | build s (all cores) | saved bytes/vector (raw 1536) | ef | recall@10 | CPU ms/query |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for name in libraries:
        try:
            with tempfile.TemporaryDirectory() as tmp:
                path = Path(tmp) / "index"
                started = time.perf_counter()
                at = BUILDERS[name](data, path)
                build = time.perf_counter() - started
                size = path.stat().st_size / rows
                for ef in EFS:
                    ms, found = cpu_ms(at(ef), qs)
                    recall = statistics.mean(
                        len(set(np.asarray(f).tolist()) & t) / K
                        for f, t in zip(found, truth, strict=True)
                    )
                    print(f"| {name} | {build:.1f} | {size:.0f} | {ef} | {recall:.3f} | {ms:.3f} |")
        except ImportError as e:
            print(f"| {name} | not installed ({e}) | | | | |")


def threshold(sizes: list[int], queries: int) -> None:
    print("\nexact scan (einsum + argpartition, k 100) against faiss HNSW (M 32, ef 128, k 100)")
    print("| rows | exact CPU ms/query | HNSW CPU ms/query | HNSW build s |")
    print("|---:|---:|---:|---:|")
    for rows in sizes:
        data, qs = clustered(rows, queries, seed=rows)

        def scan(q: np.ndarray, data: np.ndarray = data) -> np.ndarray:
            scores = np.einsum("ij,j->i", data, q)
            return np.argpartition(-scores, 100)[:100]

        exact_ms, _ = cpu_ms(scan, qs)
        import faiss

        faiss.omp_set_num_threads(os.cpu_count() or 1)
        started = time.perf_counter()
        index = faiss.IndexHNSWFlat(DIM, M, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = 40
        index.add(data)
        build = time.perf_counter() - started
        faiss.omp_set_num_threads(1)
        params = faiss.SearchParametersHNSW()
        params.efSearch = 128
        ann_ms, _ = cpu_ms(lambda q, i=index, p=params: i.search(q[None], 100, params=p), qs)
        print(f"| {rows:,} | {exact_ms:.2f} | {ann_ms:.3f} | {build:.1f} |")


def sweep(directory: Path, rows: int, efc: int | None) -> None:
    """Recall@10 and CPU by efSearch on the graph of a ``bench_scale.py`` index (or on a new
    graph over its vectors built with efConstruction ``efc``)."""
    import faiss
    from bench_scale import around, centres

    from ragtiller.index.ann import load_graph
    from ragtiller.index.versions import current_version

    graph = load_graph(current_version(directory), rows, DIM)
    assert graph is not None, f"{directory} has no graph"
    vectors = graph.vectors()
    index = graph._index
    if efc is not None:
        faiss.omp_set_num_threads(os.cpu_count() or 1)
        started = time.perf_counter()
        index = faiss.IndexHNSWFlat(DIM, M, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = efc
        index.add(np.ascontiguousarray(vectors))
        print(f"built with efConstruction {efc} in {time.perf_counter() - started:.0f} s")
        faiss.omp_set_num_threads(1)
    qs = around(centres(rows), 40, np.random.default_rng(7))
    truth = [set(np.argpartition(-np.einsum("ij,j->i", vectors, q), K)[:K].tolist()) for q in qs]
    print(f"| efSearch | recall@10 | CPU ms/query |   ({rows:,} rows)\n|---:|---:|---:|")
    for ef in (128, 256, 512, 1024):
        params = faiss.SearchParametersHNSW()
        params.efSearch = ef
        ms, found = cpu_ms(lambda q, p=params: index.search(q[None], K, params=p)[1][0], qs)
        recall = statistics.mean(
            len(set(f.tolist()) & t) / K for f, t in zip(found, truth, strict=True)
        )
        print(f"| {ef} | {recall:.3f} | {ms:.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--libraries", nargs="+", default=list(BUILDERS), choices=list(BUILDERS))
    parser.add_argument(
        "--threshold-sizes", type=int, nargs="*", default=[10_000, 25_000, 50_000, 100_000]
    )
    parser.add_argument("--saved-index", type=Path, help="sweep efSearch on this index's graph")
    parser.add_argument("--ef-construction", type=int, help="with --saved-index: rebuild first")
    args = parser.parse_args()
    if args.saved_index:
        sweep(args.saved_index, args.rows, args.ef_construction)
        return
    compare(args.rows, args.queries, args.libraries)
    if args.threshold_sizes:
        threshold(args.threshold_sizes, args.queries)


if __name__ == "__main__":
    main()
