"""A turn on a checkpointed thread behaves exactly as a plain invoke of the same input.

Each invoke's input is that turn's input: what the caller does not send is absent, never
inherited from the thread's earlier turns.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from ragtiller import InputError, build_graph
from ragtiller.index import EmbeddedIndex
from ragtiller.ingest import build_index
from ragtiller.models import HashingEmbedder

DOCS = {
    "glob.md": "# Glob\n\nPath.glob yields the files matching a pattern in pathlib.",
    "dumps.md": "# Dumps\n\njson.dumps with indent pretty-prints the JSON text.",
    "ports.md": "# Ports\n\nThe server listens on port 8000 by default.",
}


@pytest.fixture(scope="module")
def index() -> EmbeddedIndex:
    return build_index(
        [Document(page_content=t, metadata={"source": s}) for s, t in DOCS.items()],
        embedder=HashingEmbedder(dim=64),
        progress=False,
    )


@pytest.fixture(params=["sync", "async"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


_threads: Iterator[int] = iter(range(10**6))


class Thread:
    """One checkpointed thread of a graph, driven sync or async."""

    def __init__(self, graph: Any, mode: str) -> None:
        self.graph, self.mode = graph, mode
        self.config = {"configurable": {"thread_id": f"t{next(_threads)}"}}

    async def turn(self, payload: Any, **kwargs: Any) -> dict[str, Any]:
        if self.mode == "sync":
            return self.graph.invoke(payload, self.config, **kwargs)  # type: ignore[no-any-return]
        return await self.graph.ainvoke(payload, self.config, **kwargs)  # type: ignore[no-any-return]


def searched(out: dict[str, Any]) -> str:
    return str(out["manifest"].rerank_query)


async def test_a_messages_turn_after_a_query_turn_asks_its_own_question(
    index: EmbeddedIndex, mode: str
) -> None:
    thread = Thread(build_graph(index=index, checkpointer=InMemorySaver()), mode)
    first = await thread.turn({"query": "pathlib glob"})
    assert searched(first) == "pathlib glob"
    second = await thread.turn({"messages": [("user", "json dumps indent")]})
    assert searched(second) == "json dumps indent"
    assert second["documents"][0].metadata["source"] == "dumps.md"
    plain = build_graph(index=index).invoke({"messages": [("user", "json dumps indent")]})
    assert [d.id for d in second["documents"]] == [d.id for d in plain["documents"]]


async def test_a_query_turn_after_a_messages_turn_asks_its_own_question(
    index: EmbeddedIndex, mode: str
) -> None:
    thread = Thread(build_graph(index=index, checkpointer=InMemorySaver()), mode)
    await thread.turn({"messages": [("user", "json dumps indent")]})
    out = await thread.turn({"query": "which port does the server use"})
    assert searched(out) == "which port does the server use"
    again = await thread.turn({"messages": [("user", "pathlib glob")]})
    assert searched(again) == "pathlib glob"


async def test_a_turn_that_sends_no_question_is_refused_not_given_the_last_one(
    index: EmbeddedIndex, mode: str
) -> None:
    thread = Thread(build_graph(index=index, checkpointer=InMemorySaver()), mode)
    await thread.turn({"query": "pathlib glob", "tenant": "acme"})
    with pytest.raises(InputError, match="no new question"):
        await thread.turn({"tenant": "acme"})
    await thread.turn({"messages": [("user", "json dumps indent")], "tenant": "acme"})
    with pytest.raises(InputError, match="no new question"):
        await thread.turn({"tenant": "acme"})
    other = Thread(build_graph(index=index, checkpointer=InMemorySaver()), mode)
    await other.turn({"query": "pathlib glob", "namespace": "default"})
    with pytest.raises(InputError, match="no new question"):
        await other.turn({"namespace": "default"})


async def test_the_output_carries_the_answer_as_a_message_and_the_thread_keeps_the_chat(
    index: EmbeddedIndex, mode: str
) -> None:
    thread = Thread(build_graph(index=index, checkpointer=InMemorySaver()), mode)
    first = await thread.turn({"messages": [("user", "pathlib glob")]})
    *_, answer = first["messages"]
    assert isinstance(answer, AIMessage) and answer.name == "ragtiller"
    assert answer.content == first["context"]
    second = await thread.turn({"query": "json dumps indent"})
    kinds = [(type(m).__name__, m.text) for m in second["messages"]]
    assert kinds == [
        ("HumanMessage", "pathlib glob"),
        ("AIMessage", first["context"]),
        ("HumanMessage", "json dumps indent"),
        ("AIMessage", second["context"]),
    ]


def test_a_plain_invoke_returns_messages_too(index: EmbeddedIndex) -> None:
    out = build_graph(index=index).invoke({"query": "pathlib glob"})
    question, answer = out["messages"]
    assert isinstance(question, HumanMessage) and question.text == "pathlib glob"
    assert isinstance(answer, AIMessage) and answer.text == out["context"]


# --- breakpoints set per run resume to the uninterrupted result ---------------------------

NODES = ("gate", "step_back", "embed", "tier_search", "fuse", "rerank", "assemble")
RERANKED = "how do I get started with pathlib glob patterns?"
"""A broad question: its route reranks, so every node but step_back runs."""


def result(out: dict[str, Any]) -> tuple[list[Any], str, list[str]]:
    manifest = out["manifest"]
    return [d.id for d in out["documents"]], out["context"], manifest.degraded


@pytest.mark.parametrize("where", ["interrupt_before", "interrupt_after"])
@pytest.mark.parametrize("node", NODES)
async def test_a_breakpoint_set_per_run_resumes_to_the_uninterrupted_result(
    index: EmbeddedIndex, mode: str, where: str, node: str
) -> None:
    query = {"query": RERANKED}
    plain = build_graph(index=index).invoke(query)
    thread = Thread(build_graph(index=index, checkpointer=InMemorySaver()), mode)
    paused = await thread.turn(query, **{where: [node]})
    state = thread.graph.get_state(thread.config)
    if state.next:  # paused (step_back does not run without a chat model)
        assert not (paused or {}).get("documents")
        resumed = await thread.turn(None)
    else:
        resumed = paused
    assert result(resumed) == result(plain)
    assert resumed["documents"], "the uninterrupted turn finds documents"


async def test_a_turn_that_retrieves_nothing_answers_why_on_a_thread_as_plainly(
    index: EmbeddedIndex, mode: str
) -> None:
    # an agent reading the transcript must see why, not an empty AI message
    plain = build_graph(index=index).invoke({"messages": [("user", "json")]})
    thread = Thread(build_graph(index=index, checkpointer=InMemorySaver()), mode)
    await thread.turn({"messages": [("user", "pathlib glob")]})
    threaded = await thread.turn({"messages": [("user", "json")]})
    for out in (plain, threaded):
        *_, answer = out["messages"]
        assert isinstance(answer, AIMessage) and answer.name == "ragtiller"
        assert (out["context"], answer.content) == ("", "No documents retrieved (too-short).")
        assert out["documents"] == []


@pytest.mark.parametrize("node", ["embed", "fuse", "assemble"])
async def test_a_second_turn_paused_shows_none_of_the_first_turns_answer(
    index: EmbeddedIndex, mode: str, node: str
) -> None:
    """While turn 2 is paused, its state (and every ``values`` chunk) holds turn 2 only, as a
    fresh thread's paused turn does: no documents, context or manifest of turn 1."""
    thread = Thread(build_graph(index=index, checkpointer=InMemorySaver()), mode)
    await thread.turn({"query": "which port does the server listen on"})
    paused = await thread.turn({"query": RERANKED}, interrupt_before=[node])
    state = thread.graph.get_state(thread.config).values
    for values in (paused, state):
        assert not values.get("documents") and not values.get("context")
        assert "manifest" not in values
    resumed = await thread.turn(None)
    assert result(resumed) == result(build_graph(index=index).invoke({"query": RERANKED}))


@pytest.mark.parametrize("node", ["embed", "tier_search", "fuse"])
async def test_update_state_at_a_per_run_breakpoint_keeps_the_turn_on_its_path(
    index: EmbeddedIndex, mode: str, node: str
) -> None:
    """Studio's state editor and ``update_state`` read and write the thread through the same
    checkpointed hit lists the paused run saved: an update that changes nothing leaves the
    turn's result a plain invoke's (it used to skip the tier searches: 0 documents)."""
    thread = Thread(build_graph(index=index, checkpointer=InMemorySaver()), mode)
    await thread.turn({"query": RERANKED}, interrupt_before=[node])
    paused = thread.graph.get_state(thread.config)
    assert paused.next
    same = {"rerank_query": paused.values["rerank_query"]}
    if mode == "sync":
        thread.graph.update_state(thread.config, same)
    else:
        await thread.graph.aupdate_state(thread.config, same)
    resumed = await thread.turn(None)
    assert result(resumed) == result(build_graph(index=index).invoke({"query": RERANKED}))


@pytest.mark.parametrize("context", [{"top_k": 2}, {"policy": "no-llm"}, {"max_chunks": 3}])
@pytest.mark.parametrize("node", ["embed", "tier_search", "fuse", "assemble"])
async def test_a_resume_without_the_context_applies_the_paused_turns(
    index: EmbeddedIndex, mode: str, node: str, context: dict[str, Any]
) -> None:
    """LangGraph does not save a run's context: the nodes after the gate apply the one the
    gate saw, so a resume that does not repeat it (Studio's "continue") is the plain turn."""
    plain = build_graph(index=index).invoke({"query": RERANKED}, context=context)
    thread = Thread(build_graph(index=index, checkpointer=InMemorySaver()), mode)
    await thread.turn({"query": RERANKED}, context=context, interrupt_before=[node])
    resumed = await thread.turn(None)
    assert result(resumed) == result(plain)
    assert resumed["manifest"].policy_id == plain["manifest"].policy_id
    assert resumed["manifest"].overrides == context


def test_a_resume_with_another_context_is_refused(index: EmbeddedIndex) -> None:
    thread = Thread(build_graph(index=index, checkpointer=InMemorySaver()), "sync")
    thread.graph.invoke(
        {"query": RERANKED}, thread.config, context={"top_k": 2}, interrupt_before=["fuse"]
    )
    with pytest.raises(InputError, match=r"differs from the paused turn's \(top_k\)"):
        thread.graph.invoke(None, thread.config, context={"top_k": 4})
    resumed = thread.graph.invoke(None, thread.config, context={"top_k": 2})
    assert len(resumed["documents"]) == 2


def test_a_replay_from_a_mid_turn_checkpoint_is_the_turn(index: EmbeddedIndex) -> None:
    """Hit lists are checkpointed with the rest of the state, so replaying a finished turn
    from its checkpoint before fuse or assemble gives the same documents."""
    plain = build_graph(index=index).invoke({"query": RERANKED})
    g = build_graph(index=index, checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "replay"}}
    g.invoke({"query": RERANKED}, config)
    late = [s for s in g.get_state_history(config) if s.next in (("fuse",), ("assemble",))]
    assert len(late) == 2
    for snapshot in late:
        out = g.invoke(None, snapshot.config)
        assert [d.id for d in out["documents"]] == result(plain)[0]
        assert out["manifest"].degraded == plain["manifest"].degraded
