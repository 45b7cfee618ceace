"""A whole default-policy turn over real embedded tiers, side by side with an older commit.

Run on demand (not in CI):

    python benchmarks/bench_turn.py [--sizes 10000 100000] [--rounds 4] [--turns 20]
                                    [--baseline 7508b12] [--top-k 100]

The index is synthetic but real: ``rows`` child chunks in namespace ``default`` (random unit
vectors, 384-d; Zipf text over a vocabulary that holds the query's words), a parent section per
four children, and a bm25s lexical index, searched through ``DenseTier``, ``ParentChildTier`` and
``LexicalTier``. It is built once and cached under ``$TMPDIR/ragtiller-bench-turn/``. The
embedder is LangChain's ``DeterministicFakeEmbedding`` (384-d), the policy the shipped default
of each tree, and the query a broad one, so the turn routes to ``synthesis`` and searches the
tiers the default weighs (step-back is skipped: no chat model). ``--top-k N`` runs the turn
``ragtiller eval --top-k N`` runs instead: each tree's default through its own ``with_depth``
(every route returns N results, one passage per document, no context budget).

The baseline commit is extracted with ``git archive`` into ``$TMPDIR`` (nothing in the repository
changes). Each round runs one worker subprocess per tree, alternating which goes first, with
``PYTHONPATH`` set to that tree; the figures pool every round. Inside a worker every path runs
once per turn, in rotation, so drift on a shared machine hits all paths alike:

* ``direct``: the same node functions called in graph order with the graph's own edge
  functions and reducers, no LangGraph;
* ``ainvoke`` / ``invoke``: the compiled graph; ``astream`` / ``stream``: the same with
  ``stream_mode=["custom", "values"]`` (what the CLI streams);
* ``floor``: a bare 7-node LangGraph line of no-op nodes (identical in both trees: a control for
  noise between the two columns);
* per stage: the embed and tier-search nodes vs calling the providers directly;
* the deadline guard (new tree only): the nodes' guarded provider calls (deadline, bulkhead,
  output checks) vs the same calls made as the old nodes made them, in turn.

Every path also records the process's CPU time (all threads): on a shared machine the wall
clock mostly measures waiting for a core.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import numpy as np
from baseline import baseline_tree

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("TMPDIR", tempfile.gettempdir())) / "ragtiller-bench-turn"
DIM = 384
CHILDREN_PER_PARENT = 4
QUERY = "how do I get started with asyncio tasks and the event loop, w{n}x?"
"""Broad (routes to ``synthesis``). Every call gets its own ``n``: a new query vector and BM25
terms, so no turn is answered from another turn's scan."""
_queries = itertools.count()


def next_query() -> str:
    return QUERY.format(n=next(_queries) % 30_000)


WORDS = ["asyncio", "task", "tasks", "event", "loop", "started", "coroutine", "await", "future"]


def moved(name: str, *modules: str) -> Any:
    """``name`` from the first of ``modules`` that the tree on ``sys.path`` has: the 0.2
    layout (after 7508b12) moved some of the pieces a worker reads."""
    import importlib

    for module in modules:
        try:
            return getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            continue
    raise ImportError(f"{name} is in none of {modules}")


def search_request(**fields: Any) -> Any:
    return moved("SearchRequest", "ragtiller.core.tiers", "ragtiller.types")(**fields)


# --- the corpus (built by the driver with the current tree, read by both trees) -------------


def corpus_dir(rows: int) -> Path:
    return CACHE / f"corpus-{rows}"


def build_corpus(rows: int) -> Path:
    """Write (once) the dense store, parent table and BM25 index for ``rows`` chunks."""
    from ragtiller.index import LexicalTier, NumpyVectorStore
    from ragtiller.index.records import RecordTable
    from ragtiller.models import HashingEmbedder

    path = corpus_dir(rows)
    if (path / "done").exists():
        return path
    rng = np.random.default_rng(rows)
    vocab = np.array(WORDS + [f"w{i}x" for i in range(30_000)])
    ranks = np.minimum(rng.zipf(1.3, size=(rows, 60)), len(vocab)) - 1
    texts = [" ".join(row) for row in vocab[ranks]]
    parents = rows // CHILDREN_PER_PARENT
    metadatas = [
        {
            "doc_id": f"docs/file-{r // 40}.md",
            "source": f"/data/docs/file-{r // 40}.md",
            "namespace": "default",
            "title": None,
            "section_path": ["Guide", f"Part {r // CHILDREN_PER_PARENT}"],
            "parent_id": f"p{r // CHILDREN_PER_PARENT:09d}",
        }
        for r in range(rows)
    ]
    vectors = rng.standard_normal((rows, DIM), dtype=np.float32)
    ids = [f"c{r:09d}" for r in range(rows)]
    store = NumpyVectorStore.from_vectors(texts, vectors, HashingEmbedder(DIM), metadatas, ids=ids)
    store.save(path / "dense")
    RecordTable(
        [f"p{p:09d}" for p in range(parents)],
        [
            " ".join(texts[p * CHILDREN_PER_PARENT : (p + 1) * CHILDREN_PER_PARENT])
            for p in range(parents)
        ],
        [{"doc_id": f"docs/file-{p // 10}.md", "source": "/data"} for p in range(parents)],
    ).dump(path / "parents.jsonl")
    LexicalTier.build(store.records, texts).save(path / "lexical")
    (path / "done").touch()
    return path


def load_tiers(path: Path) -> list[Any]:
    """The three real tiers over a cached corpus, through the tree on ``sys.path``."""
    from ragtiller.index import DenseTier, LexicalTier, NumpyVectorStore, ParentChildTier
    from ragtiller.index.lexical import DEFAULT_LEXICAL

    RecordTable = moved("RecordTable", "ragtiller.index.records", "ragtiller.index._records")
    HashingEmbedder = moved("HashingEmbedder", "ragtiller.models", "ragtiller.index")
    store = NumpyVectorStore.load(path / "dense", HashingEmbedder(DIM), mmap=False)
    parents = RecordTable.load(path / "parents.jsonl")
    lexical = LexicalTier.load(path / "lexical", store.records, DEFAULT_LEXICAL)
    return [DenseTier(store), ParentChildTier(store, parents), lexical]


# --- the worker (runs inside one tree) --------------------------------------------------------


class Tree:
    """The graph pieces of whichever tree is on ``sys.path`` (v2 moved some of them)."""

    def __init__(self, tiers: list[Any], top_k: int | None) -> None:
        from langchain_core.embeddings import DeterministicFakeEmbedding

        from ragtiller.graph.builder import build_components, compile_graph
        from ragtiller.nodes.assemble import make_assemble
        from ragtiller.nodes.embed import make_embed
        from ragtiller.nodes.fuse import make_fuse
        from ragtiller.nodes.gate import make_gate
        from ragtiller.nodes.rerank import make_rerank
        from ragtiller.nodes.step_back import make_step_back
        from ragtiller.nodes.tier_search import make_tier_search

        self.embedder = DeterministicFakeEmbedding(size=DIM)
        self.tiers = tiers
        policy = None  # the tree's shipped default
        if top_k:
            from ragtiller.eval.variants import with_depth
            from ragtiller.policies import load_policy

            policy = with_depth(load_policy(), top_k)
        # in-process stores
        deps = build_components(policy, require_tenant=False, tiers=tiers, embedder=self.embedder)
        self.deps = deps
        self.graph = compile_graph(deps)
        try:
            from ragtiller.graph import edges  # before the edges moved into the builder
        except ImportError:
            from ragtiller.graph import builder as edges
        self.edges = edges
        states = ("ragtiller.nodes.state", "ragtiller.graph.state")
        self.reducers = {
            "stages": moved("stage_log", *states),
            "tier_hits": moved("tier_results", *states),
        }
        self.nodes = {
            "gate": make_gate(deps),
            "step_back": make_step_back(deps),
            "embed": make_embed(deps),
            "tier_search": make_tier_search(deps),
            "fuse": make_fuse(deps),
            "rerank": make_rerank(deps),
            "assemble": make_assemble(deps),
        }
        self.stage_ms: dict[str, float] = {}
        self.depth = 0
        """Hits asked of each tier (the policy's tier depth), as the embed node planned."""

    def merge(self, state: dict[str, Any], update: dict[str, Any]) -> None:
        for key, value in update.items():
            reduce = self.reducers.get(key)
            state[key] = reduce(state.get(key), value) if reduce else value

    def target(self, name: str, label: Any) -> Any:
        """An edge's result as a node name (v2 edges return path-map labels)."""
        paths = getattr(self.edges, f"AFTER_{name.upper()}_PATHS", None)
        return paths.get(label, label) if isinstance(paths, dict) else label

    async def node(self, state: dict[str, Any], name: str) -> None:
        started = time.perf_counter()
        self.merge(state, await self.nodes[name](state))
        self.stage_ms[name] = (time.perf_counter() - started) * 1000

    async def direct(self) -> dict[str, Any]:
        """The nodes in graph order, edges taken by the graph's own edge functions."""
        state: dict[str, Any] = {"query": next_query()}
        await self.node(state, "gate")
        after_gate = self.target("gate", self.edges.after_gate(state))
        if after_gate == "step_back":
            await self.node(state, "step_back")
        if after_gate != "assemble":
            await self.node(state, "embed")
            sends = self.edges.after_embed(state)
            if sends != "fuse":
                self.depth = sends[0].arg["k"]
                started = time.perf_counter()
                for update in await asyncio.gather(
                    *(self.nodes["tier_search"](s.arg) for s in sends)
                ):
                    self.merge(state, update)
                self.stage_ms["tier_search"] = (time.perf_counter() - started) * 1000
            await self.node(state, "fuse")
            if self.target("fuse", self.edges.after_fuse(state)) == "rerank":
                await self.node(state, "rerank")
        await self.node(state, "assemble")
        return state

    def providers(self, namespaces: list[str], k: int) -> tuple[float, float]:
        """Milliseconds of the bare provider calls: ``embed_query``, then each tier's ``search``."""
        query = next_query()
        started = time.perf_counter()
        vector = self.embedder.embed_query(query)
        embedded = time.perf_counter()
        for tier in self.tiers:
            tier.search(
                search_request(query=query, vector=vector, k=k, namespaces=namespaces, filter=None)
            )
        return (embedded - started) * 1000, (time.perf_counter() - embedded) * 1000

    async def guards(self, namespaces: list[str], k: int, flip: bool) -> dict[str, float]:
        """The new core's guarded provider calls (deadline, bulkhead, output check) and the
        same calls made the way the old core made them, in one process, in turn.

        The old embed node awaited ``aembed_query`` (one hop to the loop's default executor)
        and the old tier node awaited ``asearch``. Empty in a tree without deadlines."""
        try:
            from ragtiller.nodes.checks import check_hits
            from ragtiller.nodes.embed import EMBED_RETRY, embed_query
            from ragtiller.nodes.tier_search import search
        except ImportError:
            return {}
        out: dict[str, float] = {}

        async def old_style() -> None:
            query = next_query()
            started = time.perf_counter()
            vector = await self.embedder.aembed_query(query)
            embedded = time.perf_counter()
            for tier in self.tiers:
                await tier.asearch(
                    search_request(query=query, vector=vector, k=k, namespaces=namespaces)
                )
            out["old-style embed"] = (embedded - started) * 1000
            out["old-style tiers"] = (time.perf_counter() - embedded) * 1000

        async def guarded() -> None:
            query = next_query()
            state = {"turn": {"started_at": time.perf_counter()}, "route": {"truncated": False}}
            started = time.perf_counter()
            vector, _ = await embed_query(self.deps, EMBED_RETRY, query, state)  # type: ignore[arg-type]
            embedded = time.perf_counter()
            for tier in self.tiers:
                task = {
                    "tier": tier.name,
                    "query": query,
                    "vector": vector,
                    "k": k,
                    "tenant": None,
                    "namespaces": namespaces,
                    "filter": None,
                    "deadline_s": 5.0,
                    "turn_bound": False,
                }
                check_hits(await search(tier, task), k)  # type: ignore[arg-type]
            out["guarded embed"] = (embedded - started) * 1000
            out["guarded tiers"] = (time.perf_counter() - embedded) * 1000

        for run in (guarded, old_style) if flip else (old_style, guarded):
            await run()
        return out


def bare_line() -> Any:
    """The framework's floor: seven no-op ``async def`` nodes in a line."""
    from langgraph.graph import END, START, StateGraph
    from typing_extensions import TypedDict

    class S(TypedDict, total=False):
        query: str
        n: int

    async def anode(state: S) -> dict[str, Any]:
        return {"n": state.get("n", 0) + 1}

    def node(state: S) -> dict[str, Any]:
        return {"n": state.get("n", 0) + 1}

    from langgraph._internal._runnable import RunnableCallable

    builder = StateGraph(S)
    names = ["gate", "step_back", "embed", "tier_search", "fuse", "rerank", "assemble"]
    for name in names:
        builder.add_node(name, RunnableCallable(node, anode, name=name, trace=False))
    for a, b in zip([START, *names], [*names, END], strict=True):
        builder.add_edge(a, b)
    return builder.compile()


def worker(rows: int, turns: int, top_k: int | None) -> None:
    """Time every path ``turns`` times (after a warm-up) and print the samples as JSON."""
    import ragtiller

    tree = Tree(load_tiers(corpus_dir(rows)), top_k)
    graph, floor = tree.graph, bare_line()

    def inp() -> dict[str, Any]:
        return {"query": next_query()}

    loop = asyncio.new_event_loop()

    async def astream() -> None:
        async for _ in graph.astream(inp(), stream_mode=["custom", "values"]):
            pass

    def stream() -> None:
        for _ in graph.stream(inp(), stream_mode=["custom", "values"]):
            pass

    async def timed(make: Callable[[], Awaitable[Any]]) -> tuple[float, float]:
        started, cpu = time.perf_counter(), time.process_time()
        await make()
        return (time.perf_counter() - started) * 1000, (time.process_time() - cpu) * 1000

    def run_async(make: Callable[[], Awaitable[Any]]) -> tuple[float, float]:
        return loop.run_until_complete(timed(make))

    def run_sync(fn: Callable[[], Any]) -> tuple[float, float]:
        started, cpu = time.perf_counter(), time.process_time()
        fn()
        return (time.perf_counter() - started) * 1000, (time.process_time() - cpu) * 1000

    paths: dict[str, Callable[[], tuple[float, float]]] = {
        "direct": lambda: run_async(tree.direct),
        "ainvoke": lambda: run_async(lambda: graph.ainvoke(inp())),
        "astream": lambda: run_async(astream),
        "invoke": lambda: run_sync(lambda: graph.invoke(inp())),
        "stream": lambda: run_sync(stream),
        "floor ainvoke": lambda: run_async(lambda: floor.ainvoke(inp())),
        "floor invoke": lambda: run_sync(lambda: floor.invoke(inp())),
    }
    result = loop.run_until_complete(tree.direct())
    check = result["manifest"]  # the assemble node's update holds the manifest as a dict
    query_type = check["query_type"] if isinstance(check, dict) else check.query_type
    assert query_type == "synthesis", query_type
    # the default weighs parent_child 0 in fusion: it is not searched (since 2026-12-01.3)
    searched = {t for t, h in result["tier_hits"].items() if h}
    assert {"dense", "lexical"} <= searched <= {"dense", "parent_child", "lexical"}, searched
    namespaces = list(result["route"]["namespaces"])
    samples: dict[str, list[float]] = {name: [] for name in paths}
    samples.update({f"cpu {name}": [] for name in paths})
    for key in ("node embed", "node tier_search", "provider embed", "provider tiers"):
        samples[key] = []
    names = list(paths)
    for i in range(turns + 10):
        order = names[i % len(names) :] + names[: i % len(names)]
        for name in order:
            ms, cpu_ms = paths[name]()
            if name == "direct" and i >= 10:
                samples["node embed"].append(tree.stage_ms["embed"])
                samples["node tier_search"].append(tree.stage_ms["tier_search"])
            if i >= 10:
                samples[name].append(ms)
                samples[f"cpu {name}"].append(cpu_ms)
        embed_ms, tiers_ms = tree.providers(namespaces, tree.depth)
        guards = loop.run_until_complete(tree.guards(namespaces, tree.depth, flip=i % 2 == 1))
        if i >= 10:
            samples["provider embed"].append(embed_ms)
            samples["provider tiers"].append(tiers_ms)
            for key, ms in guards.items():
                samples.setdefault(key, []).append(ms)
    loop.close()
    print(json.dumps({"tree": str(Path(ragtiller.__file__).parents[1]), "samples": samples}))


# --- the driver -------------------------------------------------------------------------------


def run_worker(tree: Path, rows: int, turns: int, top_k: int | None) -> dict[str, list[float]]:
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONHASHSEED": "0"}
    env.pop("REDIS_URL", None)
    depth = ["--top-k", str(top_k)] if top_k else []
    out = subprocess.run(
        [sys.executable, __file__, "--worker", str(rows), "--turns", str(turns), *depth],
        env=env,
        cwd=tree,
        capture_output=True,
        text=True,
    )
    if out.returncode:
        raise RuntimeError(f"worker in {tree} failed:\n{out.stderr}")
    payload = json.loads(out.stdout.strip().splitlines()[-1])
    if Path(payload["tree"]).resolve() != tree.resolve():
        raise RuntimeError(f"worker imported ragtiller from {payload['tree']}, not {tree}")
    samples: dict[str, list[float]] = payload["samples"]
    return samples


def p50_p95(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]


ROWS = [
    ("turn, `graph.ainvoke`", "ainvoke"),
    ("turn, `graph.invoke` (sync)", "invoke"),
    ("turn, `graph.astream` custom + values", "astream"),
    ("turn, `graph.stream` custom + values (sync)", "stream"),
    ("nodes called directly (async)", "direct"),
    ("bare 7-node LangGraph, `ainvoke` (floor; same code both sides)", "floor ainvoke"),
    ("bare 7-node LangGraph, `invoke` (floor; same code both sides)", "floor invoke"),
    ("embed stage: node", "node embed"),
    ("embed stage: `embed_query` called directly", "provider embed"),
    ("tier stage: node, three tiers in parallel", "node tier_search"),
    ("tier stage: the three `search` calls directly, one after another", "provider tiers"),
]
OVERHEADS = [
    ("`ainvoke` minus direct nodes", "ainvoke", "direct"),
    ("`invoke` minus direct nodes", "invoke", "direct"),
    ("`astream` (custom events) minus `ainvoke`", "astream", "ainvoke"),
    ("`stream` (custom events) minus `invoke`", "stream", "invoke"),
    ("floor: bare `ainvoke` (7 no-op nodes)", "floor ainvoke", None),
    (
        "embed node minus `embed_query` (deadline + bulkhead + check)",
        "node embed",
        "provider embed",
    ),
]


def table(rows: int, old: dict[str, list[float]], new: dict[str, list[float]], label: str) -> None:
    n = len(new["ainvoke"])
    print(f"\n### {rows:,} chunks ({n} turns per path per tree)\n")
    print(
        f"| path | {label} p50 ms | {label} p95 ms | new p50 ms | new p95 ms "
        f"| {label} CPU p50 ms | new CPU p50 ms |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for title, key in ROWS:
        (o50, o95), (n50, n95) = p50_p95(old[key]), p50_p95(new[key])
        cpu = f"cpu {key}"
        cpus = (
            f"{statistics.median(old[cpu]):.2f} | {statistics.median(new[cpu]):.2f}"
            if cpu in new
            else "| "
        )
        print(f"| {title} | {o50:.2f} | {o95:.2f} | {n50:.2f} | {n95:.2f} | {cpus} |")
    print(f"\n| p50 difference | {label} ms | new ms | {label} CPU ms | new CPU ms |")
    print("|---|---:|---:|---:|---:|")
    for title, key, base in OVERHEADS:
        cells = []
        for prefix in ("", "cpu "):
            if prefix + key not in new:
                cells += ["", ""]
                continue
            for side in (old, new):
                minus = statistics.median(side[prefix + base]) if base else 0.0
                cells.append(f"{statistics.median(side[prefix + key]) - minus:+.2f}")
        print(f"| {title} | {' | '.join(cells)} |")


GUARDS = [
    ("`embed_query` called directly", "provider embed"),
    ("`aembed_query` (the old node's call: one executor hop)", "old-style embed"),
    ("the new node's guarded call (deadline, bulkhead hop, vector check)", "guarded embed"),
    ("three `search` calls directly", "provider tiers"),
    ("three `asearch` calls (the old node's call)", "old-style tiers"),
    ("three guarded calls (deadline, hit check)", "guarded tiers"),
]


def guard_table(new: dict[str, list[float]]) -> None:
    """The deadline guard against the same provider call unguarded, in the new tree's process."""
    if "guarded embed" not in new:
        return
    print("\n| provider call, new tree's process | p50 ms | p95 ms |")
    print("|---|---:|---:|")
    for title, key in GUARDS:
        p50, p95 = p50_p95(new[key])
        print(f"| {title} | {p50:.3f} | {p95:.3f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--turns", type=int, default=20, help="timed turns per path per round")
    parser.add_argument("--baseline", default="7508b12", help="commit to compare with")
    parser.add_argument(
        "--top-k", type=int, help="the turn `ragtiller eval --top-k N` runs (default: a user's)"
    )
    parser.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.turns, args.top_k)
        return
    sys.path.insert(0, str(ROOT))
    old_tree = baseline_tree(args.baseline, CACHE)
    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average "
        f"{os.getloadavg()[0]:.1f} at start; baseline {args.baseline} ({old_tree}), new {ROOT}; "
        f"turn: {f'eval --top-k {args.top_k}' if args.top_k else 'the default policy'}"
    )
    for rows in args.sizes:
        build_corpus(rows)
        pooled: dict[str, dict[str, list[float]]] = {"old": {}, "new": {}}
        for r in range(args.rounds):
            sides = [("old", old_tree), ("new", ROOT)]
            for side, tree in sides if r % 2 == 0 else sides[::-1]:
                for key, values in run_worker(tree, rows, args.turns, args.top_k).items():
                    pooled[side].setdefault(key, []).extend(values)
        table(rows, pooled["old"], pooled["new"], args.baseline)
        guard_table(pooled["new"])
    print(f"\nload average {os.getloadavg()[0]:.1f} at end")


if __name__ == "__main__":
    main()
