"""The graph's own overhead per turn, as issue 28 defines it, against a bare 7-node LangGraph.

Run on demand (not in CI):

    python benchmarks/bench_overhead.py [--rows 1000 0] [--rounds 4] [--blocks 15]
                                        [--block 40] [--baseline 1573e84]

Overhead is the CPU a turn costs through ``graph.ainvoke`` (or ``graph.invoke``) minus the CPU
of the work itself done as plain function calls: ``embed_query``, the tiers' ``search`` (as the
graph holds them, and the recipe's steps on their hits, with the fuse
node's own arguments. The floor is a bare line of 7 no-op nodes in LangGraph (``ainvoke`` with
async nodes, ``invoke`` with sync ones); the ratio is overhead / floor (the goal: at most 1.5x).
Everything else the graph does counts as overhead: routing, the deadlines and checks, the
passage choice, the documents and the manifest. The last ratio divides the ``ainvoke``
overhead by ragtiller's own topology with no-op nodes (``bench_graph.bare_same_shape``: the
same state schema, conditional edges and ``Send`` fan-out), the figure issue 42 tracks.

``--rows N`` (N > 0): ``bench_turn.py``'s real dense, parent-child and BM25 tiers over N
synthetic chunks (built once and cached), the shipped policy and its broad query.
``--rows 0``: ``bench_graph.py``'s components, trivial in-memory tiers (20/8/20 hits, searched
on a bulkhead thread as any sync-only tier) with rerank on for synthesis, so every stage runs.

CPU is ``time.process_time`` (all threads of the process): on a shared machine the wall clock
measures waiting for a core. Each path runs ``--block`` turns in a row per block, every path one
block in rotation, and a path's figure is the median over its blocks of CPU per turn. With
``--baseline`` each round runs one worker process per tree (the commit extracted with
``git archive``, on its own ``PYTHONPATH``), alternating which goes first.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("TMPDIR", tempfile.gettempdir())) / "ragtiller-bench-overhead"
PATHS = ("floor ainvoke", "floor invoke", "shape", "direct", "work", "ainvoke", "invoke")


def bare_line() -> Any:
    """Seven no-op nodes in a line; each has an async body for ``ainvoke`` and a sync one for
    ``invoke``, so neither path hops a thread (as LangGraph wraps a plain function)."""
    from langgraph._internal._runnable import RunnableCallable
    from langgraph.graph import END, START, StateGraph
    from typing_extensions import TypedDict

    class S(TypedDict, total=False):
        query: str
        n: int

    def node(state: S) -> dict[str, Any]:
        return {"n": state.get("n", 0) + 1}

    async def anode(state: S) -> dict[str, Any]:
        return {"n": state.get("n", 0) + 1}

    builder = StateGraph(S)
    names = ["gate", "step_back", "embed", "tier_search", "fuse", "rerank", "assemble"]
    for name in names:
        builder.add_node(name, RunnableCallable(node, anode, name=name, trace=False))
    for a, b in zip([START, *names], [*names, END], strict=True):
        builder.add_edge(a, b)
    return builder.compile()


def setup(rows: int) -> tuple[Any, Any, Callable[[], str]]:
    """The graph, its components and a fresh query per call: ``bench_turn.py``'s real tiers
    over ``rows`` chunks with the shipped policy, or for ``rows == 0`` ``bench_graph.py``'s."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from ragtiller.graph.builder import build_components, compile_graph

    if rows == 0:
        import bench_graph

        counter = iter(range(10**9))
        graph, deps = bench_graph.components()
        return graph, deps, lambda: f"{bench_graph.QUERY} w{next(counter) % 30_000}"
    import bench_turn
    from langchain_core.embeddings import DeterministicFakeEmbedding

    tiers = bench_turn.load_tiers(bench_turn.corpus_dir(rows))
    embedder = DeterministicFakeEmbedding(size=bench_turn.DIM)
    deps = build_components(
        None, require_tenant=False, tiers=tiers, embedder=embedder
    )  # in-process stores
    return compile_graph(deps), deps, bench_turn.next_query


def worker(rows: int, blocks: int, block: int) -> None:
    """Time every path in blocks, in rotation, and print CPU ms per turn per block as JSON."""
    import ragtiller
    from ragtiller.core.tiers import SearchRequest, tier_role
    from ragtiller.ranking import recipe
    from ragtiller.ranking.fusion import weights_by_name

    try:
        from ragtiller.ranking.recipe import CandidateTable, SentenceCoverage
    except ImportError:  # a baseline from before they moved into the recipe
        from ragtiller.ranking.coverage import SentenceCoverage  # type: ignore[no-redef]
        from ragtiller.ranking.table import CandidateTable  # type: ignore[no-redef]

    graph, deps, next_query = setup(rows)

    def inp() -> dict[str, Any]:
        return {"query": next_query()}

    floor = bare_line()
    first = graph.invoke(inp())
    manifest = first["manifest"]
    assert manifest.query_type == "synthesis", manifest.query_type
    # the tiers the turn searched: a tier weighed 0 (parent_child, by default) is not searched
    searched = [name for name in deps.tiers if name in manifest.tiers]
    assert {"dense", "lexical"} <= set(searched), manifest.tiers
    route_k = deps.policy.tier_hits
    namespaces = list(manifest.selected_namespaces)
    fusion, cap = deps.policy.fusion, deps.policy.budgets.candidate_cap
    roles = {name: tier_role(tier) for name, tier in deps.tiers.items()}
    weights = weights_by_name(fusion.tier_weights, roles)
    rescore = SentenceCoverage.from_tiers(deps.tiers.values())
    how: dict[str, Any] = {"method": fusion.method, "rrf_k": fusion.rrf_k, "weights": weights}

    def work() -> None:
        """The turn's work as plain calls: ``embed_query``, each tier's ``search`` (the tiers
        as the graph holds them), then the recipe's steps (no feedback: these tiers are not
        the embedded dense tier)."""
        query = next_query()
        vector = deps.embedder.embed_query(query)
        hits = {}
        for name in searched:
            tier = deps.tiers[name]
            request = SearchRequest(
                query=query,
                vector=vector if tier.needs_vector else None,
                k=route_k,
                namespaces=namespaces,
                filter=None,
            )
            hits[name] = tier.search(request)
        table = CandidateTable(hits).head(cap)
        placed = recipe.place(table, recipe.fuse(table, **how), **how)
        recipe.narrow(recipe.rescore(placed, query, rescore, depth=cap), cap)

    import bench_graph

    shape = bench_graph.bare_same_shape()
    nodes = {name: make(deps) for name, make in bench_graph.NODE_MAKERS.items()}

    async def direct_block(n: int) -> None:
        for _ in range(n):
            await bench_graph.direct_turn(nodes, next_query())

    loop = asyncio.new_event_loop()

    async def ainvoke_block(g: Any, n: int) -> None:
        for _ in range(n):
            await g.ainvoke(inp())

    def invoke_block(g: Any, n: int) -> None:
        for _ in range(n):  # each result dropped at once, as above (no survivors for the GC)
            g.invoke(inp())

    def work_block(n: int) -> None:
        for _ in range(n):
            work()

    paths: dict[str, Callable[[int], None]] = {
        "floor ainvoke": lambda n: loop.run_until_complete(ainvoke_block(floor, n)),
        "floor invoke": lambda n: invoke_block(floor, n),
        "shape": lambda n: loop.run_until_complete(ainvoke_block(shape, n)),
        "direct": lambda n: loop.run_until_complete(direct_block(n)),
        "work": work_block,
        "ainvoke": lambda n: loop.run_until_complete(ainvoke_block(graph, n)),
        "invoke": lambda n: invoke_block(graph, n),
    }
    for run in paths.values():  # warm-up
        run(block * 2)
    samples: dict[str, list[float]] = {name: [] for name in PATHS}
    for i in range(blocks):
        for name in PATHS[i % len(PATHS) :] + PATHS[: i % len(PATHS)]:
            cpu = time.process_time()
            paths[name](block)
            samples[name].append((time.process_time() - cpu) * 1000 / block)
    loop.close()
    print(json.dumps({"tree": str(Path(ragtiller.__file__).parents[1]), "samples": samples}))


def run_worker(tree: Path, rows: int, args: argparse.Namespace) -> dict[str, list[float]]:
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONHASHSEED": "0"}
    env.pop("REDIS_URL", None)
    command = [sys.executable, __file__, "--worker", str(rows), "--blocks", str(args.blocks)]
    command += ["--block", str(args.block)]
    out = subprocess.run(command, env=env, cwd=tree, capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(f"worker in {tree} failed:\n{out.stderr}")
    payload = json.loads(out.stdout.strip().splitlines()[-1])
    if Path(payload["tree"]).resolve() != tree.resolve():
        raise RuntimeError(f"worker imported ragtiller from {payload['tree']}, not {tree}")
    samples: dict[str, list[float]] = payload["samples"]
    return samples


def summary(samples: dict[str, list[float]]) -> dict[str, float]:
    """Medians per path, then overhead (graph minus work) and its ratio to the floor."""
    med = {name: statistics.median(values) for name, values in samples.items()}
    for run in ("ainvoke", "invoke"):
        med[f"{run} overhead"] = med[run] - med["work"]
        med[f"{run} ratio"] = med[f"{run} overhead"] / med[f"floor {run}"]
    med["shape ratio"] = med["ainvoke overhead"] / med["shape"]
    med["nodes"] = med["direct"] - med["work"]
    med["carrying"] = med["ainvoke"] - med["direct"] - med["shape"]
    return med


ROWS = [
    ("`graph.ainvoke`", "ainvoke", "ms"),
    ("`graph.invoke` (sync)", "invoke", "ms"),
    ("`embed_query`, tiers and `rank_passages` called directly", "work", "ms"),
    ("bare 7-node LangGraph, `ainvoke` (floor)", "floor ainvoke", "ms"),
    ("bare 7-node LangGraph, `invoke` (floor)", "floor invoke", "ms"),
    ("no-op nodes in ragtiller's topology and state, `ainvoke`", "shape", "ms"),
    ("the seven nodes called directly, no LangGraph", "direct", "ms"),
    ("the nodes' own cost beyond the work (direct minus work)", "nodes", "ms"),
    ("LangGraph carrying the turn (`ainvoke` minus direct minus topology)", "carrying", "ms"),
    ("overhead, `ainvoke` (minus direct work)", "ainvoke overhead", "ms"),
    ("overhead, `invoke` (minus direct work)", "invoke overhead", "ms"),
    ("**ratio, `ainvoke` overhead / floor** (goal ≤ 1.5)", "ainvoke ratio", "x"),
    ("**ratio, `invoke` overhead / floor** (goal ≤ 1.5)", "invoke ratio", "x"),
    ("**ratio, `ainvoke` overhead / no-op topology** (issue 42: toward 1.5)", "shape ratio", "x"),
]


def table(columns: list[tuple[str, dict[str, float]]]) -> None:
    print("| CPU per turn, median of blocks | " + " | ".join(c for c, _ in columns) + " |")
    print("|---|" + "---:|" * len(columns))
    for title, key, unit in ROWS:
        cells = [f"{med[key]:.2f}{'x' if unit == 'x' else ''}" for _, med in columns]
        print(f"| {title} | " + " | ".join(cells) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[1000, 0], help="0: trivial tiers")
    parser.add_argument("--rounds", type=int, default=4, help="worker processes per tree")
    parser.add_argument("--blocks", type=int, default=15, help="blocks per path per worker")
    parser.add_argument("--block", type=int, default=40, help="turns per block")
    parser.add_argument("--baseline", help="also time this commit, side by side")
    parser.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker is not None:
        worker(args.worker, args.blocks, args.block)
        return
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from baseline import baseline_tree
    from bench_turn import build_corpus

    trees = [("this tree", ROOT)]
    if args.baseline:
        trees.insert(0, (args.baseline, baseline_tree(args.baseline, CACHE)))
    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average "
        f"{os.getloadavg()[0]:.1f} at start; {args.rounds} rounds x {args.blocks} blocks x "
        f"{args.block} turns per path per tree"
    )
    for rows in args.rows:
        if rows:
            build_corpus(rows)
        pooled: dict[str, dict[str, list[float]]] = {label: {} for label, _ in trees}
        per_round: dict[str, list[dict[str, float]]] = {label: [] for label, _ in trees}
        for r in range(args.rounds):
            for label, tree in trees if r % 2 == 0 else trees[::-1]:
                samples = run_worker(tree, rows, args)
                per_round[label].append(summary(samples))
                for key, values in samples.items():
                    pooled[label].setdefault(key, []).extend(values)
        print(
            f"\n### {f'{rows:,} chunks, real tiers' if rows else 'trivial tiers (bench_graph)'}\n"
        )
        table([(label, summary(pooled[label])) for label, _ in trees])
        print("\nratio per round (ainvoke / invoke over the floor; ainvoke over the topology):")
        for label, rounds in per_round.items():
            cells = ", ".join(
                f"{m['ainvoke ratio']:.2f} / {m['invoke ratio']:.2f}; {m['shape ratio']:.2f}"
                for m in rounds
            )
            print(f"- {label}: {cells}")
    print(f"\nload average {os.getloadavg()[0]:.1f} at end")


if __name__ == "__main__":
    main()
