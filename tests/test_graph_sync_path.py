"""The sync API: one hop to the node loop per top-level run, LangGraph's own path otherwise."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from fixtures.fakes import StaticTier, hit
from langchain_core.embeddings import DeterministicFakeEmbedding
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from ragtiller import build_graph
from ragtiller.errors import InputError
from ragtiller.graph import RetrievalGraph, retrieval_graph
from ragtiller.graph.retrieval_graph import iterate_sync, run_sync

BROAD = "how do I get started with asyncio?"


@pytest.fixture
def hops(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Counts the hops to the node loop (``run_sync`` calls), in the module under test."""
    calls: list[str] = []
    original = retrieval_graph.run_sync

    def counted(coro_fn: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(getattr(coro_fn, "__name__", "?"))
        return original(coro_fn, *args, **kwargs)

    monkeypatch.setattr(retrieval_graph, "run_sync", counted)
    return calls


def graph(**kwargs: Any) -> Any:
    tiers = [
        StaticTier("dense", [hit("dense", f"c{i}", 1 - i / 10) for i in range(4)]),
        StaticTier("lexical", [hit("lexical", "c2", 3.0)], needs_vector=False),
    ]
    return build_graph(
        require_tenant=False, tiers=tiers, embedder=DeterministicFakeEmbedding(size=8), **kwargs
    )


def comparable(out: dict[str, Any]) -> dict[str, Any]:
    manifest = out["manifest"].model_dump(exclude={"run_id", "created_at", "latency_ms", "stages"})
    return {"context": out["context"], "ids": [d.id for d in out["documents"]], **manifest}


def test_a_top_level_invoke_hops_to_the_node_loop_once(hops: list[str]) -> None:
    g = graph()
    assert isinstance(g, RetrievalGraph)
    sync = g.invoke({"query": BROAD})
    assert hops == ["ainvoke"]
    async_ = asyncio.run(g.ainvoke({"query": BROAD}))
    assert comparable(sync) == comparable(async_)
    assert sync["documents"]


def test_sync_stream_gives_the_events_of_the_async_stream() -> None:
    g = graph()

    async def collect() -> list[Any]:
        return [c async for c in g.astream({"query": BROAD}, stream_mode="custom")]

    sync_events = list(g.stream({"query": BROAD}, stream_mode="custom"))
    async_events = asyncio.run(collect())

    def steps(events: list[Any]) -> list[tuple[str, str]]:
        return [(e["step"], e["status"]) for e in events]

    assert steps(sync_events) == steps(async_events)
    assert ("assemble", "done") in steps(sync_events)


def test_a_bad_input_raises_the_same_error_on_the_one_hop_path() -> None:
    with pytest.raises(InputError, match="must be a str"):
        graph().invoke({"query": 42})


def test_inside_a_parent_graph_langgraph_runs_its_own_sync_path(hops: list[str]) -> None:
    inner = graph()

    class Outer(TypedDict, total=False):
        query: str
        context: str

    def retrieve(state: Outer) -> dict[str, Any]:
        return {"context": inner.invoke({"query": state["query"]})["context"]}

    builder = StateGraph(Outer)
    builder.add_node("retrieve", retrieve)
    builder.add_edge(START, "retrieve")
    builder.add_edge("retrieve", END)
    out = builder.compile().invoke({"query": BROAD})
    assert "[1]" in out["context"]
    assert "ainvoke" not in hops
    assert {"gate", "embed", "tier_search", "fuse", "assemble"} <= set(hops)  # one per node


class SyncOnlySaver(InMemorySaver):
    """A checkpointer with no async methods (like many third-party savers)."""

    aget_tuple = BaseCheckpointSaver.aget_tuple  # type: ignore[assignment]
    aput = BaseCheckpointSaver.aput  # type: ignore[assignment]
    aput_writes = BaseCheckpointSaver.aput_writes  # type: ignore[assignment]
    alist = BaseCheckpointSaver.alist  # type: ignore[assignment]


def test_a_sync_only_checkpointer_keeps_langgraphs_sync_path(hops: list[str]) -> None:
    g = graph(checkpointer=SyncOnlySaver())
    config = {"configurable": {"thread_id": "t1"}}
    out = g.invoke({"query": BROAD}, config)
    assert out["documents"] and "ainvoke" not in hops
    assert g.get_state(config).values["context"] == out["context"]


def test_an_async_checkpointer_takes_the_one_hop_path(hops: list[str]) -> None:
    g = graph(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t1"}}
    out = g.invoke({"query": BROAD}, config)
    assert hops == ["ainvoke"]
    assert g.get_state(config).values["context"] == out["context"]


def test_invoke_works_where_the_calling_thread_runs_a_loop() -> None:
    g = graph()

    async def notebook_cell() -> dict[str, Any]:
        out: dict[str, Any] = g.invoke({"query": BROAD})  # Jupyter: a loop already runs here
        return out

    assert asyncio.run(notebook_cell())["documents"]


def test_closing_a_sync_stream_early_cancels_the_run() -> None:
    closed = threading.Event()

    async def endless() -> AsyncIterator[int]:
        try:
            n = 0
            while True:
                yield n
                n += 1
                await asyncio.sleep(0.001)
        finally:
            closed.set()

    items: Iterator[int] = iterate_sync(endless())
    assert [next(items), next(items)] == [0, 1]
    items.close()  # type: ignore[attr-defined]
    assert closed.wait(5)


def test_errors_and_results_cross_the_hop() -> None:
    async def boom() -> None:
        raise KeyError("missing")

    async def double(x: int, *, times: int) -> int:
        await asyncio.sleep(0)
        return x * times

    with pytest.raises(KeyError, match="missing"):
        run_sync(boom)
    assert run_sync(double, 21, times=2) == 42

    async def failing() -> AsyncIterator[int]:
        yield 1
        raise ValueError("tier exploded")

    with pytest.raises(ValueError, match="tier exploded"):
        list(iterate_sync(failing()))


def test_on_the_loop_thread_the_graph_does_not_wait_for_itself() -> None:
    g = graph()
    run_sync(asyncio.sleep, 0)  # the loop exists
    loop_thread = retrieval_graph._loop_thread
    assert loop_thread is not None

    async def on_the_loop() -> bool:
        return retrieval_graph.one_hop(g.graph, None)

    assert run_sync(on_the_loop) is False
    assert retrieval_graph.one_hop(g.graph, None) is True
