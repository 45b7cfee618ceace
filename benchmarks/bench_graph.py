"""The graph's own overhead per turn: a full turn with trivial tiers vs the same nodes called directly.

Run on demand (not in CI):  python benchmarks/bench_graph.py [--turns 2000]

Both sides run the same node functions on the same inputs; the difference is LangGraph's
scheduling, state merging, the Send fan-out and event delivery, measured side by side in one run
(every path once per turn, in rotation). The tiers are trivial in-memory lists; for a turn over
real 10k/100k-chunk tiers, against an older commit, see ``bench_turn.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from langchain_core.embeddings import DeterministicFakeEmbedding
from langgraph.graph import END, START, StateGraph
from langgraph.types import Send

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from fixtures.fakes import StaticTier, hit

from ragtiller.core.turn import TierTask
from ragtiller.graph import builder
from ragtiller.graph.builder import build_components, compile_graph, node_makers
from ragtiller.nodes.state import InputState, OutputState, RetrievalState, stage_log, tier_results
from ragtiller.policies import load_policy

# the edges, in the builder (a baseline tree of bench_overhead's may still have graph/edges.py)
edges = builder if hasattr(builder, "edge") else importlib.import_module("ragtiller.graph.edges")
AFTER_FUSE_PATHS, AFTER_GATE_PATHS = edges.AFTER_FUSE_PATHS, edges.AFTER_GATE_PATHS
NO_STEP_BACK, RERANK, edge = edges.NO_STEP_BACK, edges.RERANK, edges.edge
after_embed, after_fuse, after_gate = edges.after_embed, edges.after_fuse, edges.after_gate

QUERY = "how do I get started with asyncio?"  # broad: step-back skipped (no LLM), three tiers


def tiers() -> list[StaticTier]:
    """Three trivial in-memory tiers: 20 dense, 8 parent-child and 20 lexical hits."""
    return [
        StaticTier("dense", [hit("dense", f"c{i}", 1 - i / 50) for i in range(20)]),
        StaticTier("parent_child", [hit("parent_child", f"p{i}", 1 - i / 20) for i in range(8)]),
        StaticTier(
            "lexical", [hit("lexical", f"c{i}", 10 - i) for i in range(20)], needs_vector=False
        ),
    ]


def components() -> tuple[Any, Any]:
    policy = load_policy()  # with rerank on for synthesis, so the turn runs every stage
    synthesis = policy.routes["synthesis"].model_copy(update={"rerank": True})
    policy = policy.model_copy(update={"routes": {**policy.routes, "synthesis": synthesis}})
    deps = build_components(
        policy, require_tenant=False, tiers=tiers(), embedder=DeterministicFakeEmbedding(size=32)
    )
    return compile_graph(deps), deps


def merge(state: dict[str, Any], update: dict[str, Any]) -> None:
    for key, value in update.items():
        if key == "stages":
            state[key] = stage_log(state.get(key), value)
        elif key == "tier_hits":
            state[key] = tier_results(state.get(key), value)
        else:
            state[key] = value


NODE_MAKERS = node_makers()
"""The graph's own node makers (no namespaces declared, as ``components()`` builds it)."""


async def direct_turn(nodes: dict[str, Any], query: str = QUERY) -> dict[str, Any]:
    """The nodes in graph order, edges evaluated by the same router functions, no LangGraph."""
    state: dict[str, Any] = {"query": query}
    merge(state, await nodes["gate"](state))
    if AFTER_GATE_PATHS[after_gate(state)] == "step_back":
        merge(state, await nodes["step_back"](state))
    merge(state, await nodes["embed"](state))
    sends = after_embed(state)
    if sends != "fuse":
        updates = await asyncio.gather(*(nodes["tier_search"](s.arg) for s in sends))
        for update in updates:
            merge(state, update)
    merge(state, await nodes["fuse"](state))
    if AFTER_FUSE_PATHS[after_fuse(state)] == "rerank":
        merge(state, await nodes["rerank"](state))
    merge(state, await nodes["assemble"](state))
    return state


def bare_graph() -> Any:
    """The framework's floor: seven no-op ``async def`` nodes in a line, same stream modes."""
    from typing_extensions import TypedDict

    class S(TypedDict, total=False):
        query: str
        n: int

    async def node(state: S) -> dict[str, Any]:
        return {"n": state.get("n", 0) + 1}

    builder = StateGraph(S)
    names = ["gate", "step_back", "embed", "tier_search", "fuse", "rerank", "assemble"]
    for name in names:
        builder.add_node(name, node)
    for a, b in zip([START, *names], [*names, END], strict=True):
        builder.add_edge(a, b)
    return builder.compile()


def bare_same_shape() -> Any:
    """No-op nodes in ragtiller's own topology: the same state schema, named conditional edges
    (as async edge functions) and Send fan-out, taking the path this benchmark's turn takes."""

    async def gate(state: Any) -> dict[str, Any]:
        return {"embed_query": state["query"], "rerank_query": state["query"]}

    async def noop(state: Any) -> dict[str, Any]:
        return {}

    async def tier(task: Any) -> dict[str, Any]:
        return {"tier_hits": {task["tier"]: []}}

    async def assemble(state: Any) -> dict[str, Any]:
        return {"documents": [], "context": ""}

    def to_embed(state: Any) -> str:
        return NO_STEP_BACK

    def fan_out(state: Any) -> list[Send]:
        return [Send("tier_search", {"tier": t}) for t in ("dense", "parent_child", "lexical")]

    def to_rerank(state: Any) -> str:
        return RERANK

    builder = StateGraph(RetrievalState, input_schema=InputState, output_schema=OutputState)
    for name, fn in [
        ("gate", gate),
        ("step_back", noop),
        ("embed", noop),
        ("fuse", noop),
        ("rerank", noop),
        ("assemble", assemble),
    ]:
        builder.add_node(name, fn)
    builder.add_node("tier_search", tier, input_schema=TierTask)
    builder.add_edge(START, "gate")
    builder.add_conditional_edges("gate", edge(to_embed), AFTER_GATE_PATHS)
    builder.add_edge("step_back", "embed")
    builder.add_conditional_edges("embed", edge(fan_out), ["tier_search", "fuse"])
    builder.add_edge("tier_search", "fuse")
    builder.add_conditional_edges("fuse", edge(to_rerank), AFTER_FUSE_PATHS)
    builder.add_edge("rerank", "assemble")
    builder.add_edge("assemble", END)
    return builder.compile()


def main(turns: int) -> None:
    graph, deps = components()
    nodes = {name: make(deps) for name, make in NODE_MAKERS.items()}
    inp = {"query": QUERY}
    bare, shaped = bare_graph(), bare_same_shape()
    loop = asyncio.new_event_loop()

    async def astream_custom() -> None:
        async for _ in graph.astream(inp, stream_mode=["custom", "values"]):
            pass

    def stream_custom() -> None:
        for _ in graph.stream(inp, stream_mode=["custom", "values"]):
            pass

    async def timed(make: Callable[[], Awaitable[Any]]) -> float:
        start = time.perf_counter()
        await make()
        return (time.perf_counter() - start) * 1000

    def run_async(make: Callable[[], Awaitable[Any]]) -> float:
        return loop.run_until_complete(timed(make))

    def run_sync(fn: Callable[[], Any]) -> float:
        start = time.perf_counter()
        fn()
        return (time.perf_counter() - start) * 1000

    paths: dict[str, Callable[[], float]] = {
        "bare 7-node LangGraph, ainvoke (framework floor)": lambda: run_async(
            lambda: bare.ainvoke(inp)
        ),
        "no-op nodes in ragtiller's topology, ainvoke": lambda: run_async(
            lambda: shaped.ainvoke(inp)
        ),
        "nodes called directly (async)": lambda: run_async(lambda: direct_turn(nodes)),
        "graph.ainvoke": lambda: run_async(lambda: graph.ainvoke(inp)),
        "graph.astream custom+values": lambda: run_async(astream_custom),
        "graph.invoke (sync)": lambda: run_sync(lambda: graph.invoke(inp)),
        "graph.stream custom+values (sync)": lambda: run_sync(stream_custom),
    }
    # Every path once per turn, in rotation, so drift on a shared machine hits all rows alike.
    names = list(paths)
    rows: dict[str, list[float]] = {name: [] for name in names}
    for i in range(turns + 50):
        for name in names[i % len(names) :] + names[: i % len(names)]:
            ms = paths[name]()
            if i >= 50:  # warm-up
                rows[name].append(ms)
    loop.close()
    base = statistics.median(rows["nodes called directly (async)"])
    print(f"turns per row: {turns}; query: {QUERY!r}\n")
    print("| path | p50 ms | p95 ms | minus direct nodes, p50 ms |")
    print("|---|---|---|---|")
    for name, samples in rows.items():
        samples.sort()
        p50, p95 = statistics.median(samples), samples[int(len(samples) * 0.95)]
        print(f"| {name} | {p50:.2f} | {p95:.2f} | {p50 - base:+.2f} |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=1000)
    main(parser.parse_args().turns)
