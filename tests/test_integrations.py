"""The graph inside LangChain and LangGraph: retriever, agent tool, and subgraph state mapping."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest
from fixtures.fakes import StaticTier, hit
from langchain.agents import create_agent
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableLambda
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from pydantic import Field, ValidationError
from typing_extensions import TypedDict

from ragtiller import ConfigurationError, InputError, RunManifest, build_graph
from ragtiller.core.tiers import STAGES
from ragtiller.graph import checkpoint_serde
from ragtiller.integrations.langchain import (
    RUN_ID_KEY,
    ManifestCollector,
    RagtillerRetriever,
    as_retriever,
    as_tool,
)
from ragtiller.models import HashingEmbedder

FACTUAL = "which port does the server listen on by default"
BROAD = "how do I get started with asyncio?"


def tiers(**metadata: Any) -> list[StaticTier]:
    return [
        StaticTier(
            "dense",
            [
                hit("dense", f"c{i}", 0.9 - i / 10, text=f"port setting number {i}", **metadata)
                for i in range(4)
            ],
        ),
        StaticTier(
            "lexical",
            [hit("lexical", "c1", 7.0, text="port setting number 1", **metadata)],
            needs_vector=False,
        ),
    ]


def graph(**kwargs: Any) -> Any:
    kwargs.setdefault("tiers", tiers())
    return build_graph(require_tenant=False, embedder=HashingEmbedder(dim=16), **kwargs)


def ids(documents: Sequence[Document]) -> list[str]:
    return [d.metadata["id"] for d in documents]


# --- retriever ---------------------------------------------------------------------------


def test_retriever_returns_the_graph_documents_and_sends_the_manifest_once() -> None:
    g = graph()
    expected = g.invoke({"query": FACTUAL})
    collector = ManifestCollector()
    docs = as_retriever(g).invoke(FACTUAL, config={"callbacks": [collector]})
    assert ids(docs) == ids(expected["documents"])
    (manifest,) = collector.manifests
    assert {d.metadata[RUN_ID_KEY] for d in docs} == {manifest["run_id"]}
    assert json.loads(json.dumps(manifest)) == manifest
    parsed = RunManifest.model_validate(manifest)
    assert parsed.query_type == expected["manifest"].query_type == "factual_lookup"
    assert [s.step for s in parsed.stages if s.step != "tier_search"] == [
        s for s in STAGES if s != "tier_search"
    ]
    assert RUN_ID_KEY not in expected["documents"][0].metadata  # the graph's output is untouched


async def test_retriever_async_path_matches_sync() -> None:
    retriever = as_retriever(graph())
    sync_docs = retriever.invoke(FACTUAL)
    collector = ManifestCollector()
    async_docs = await retriever.ainvoke(FACTUAL, config={"callbacks": [collector]})
    assert ids(async_docs) == ids(sync_docs)
    assert collector.manifests[0]["rerank_query"] == FACTUAL


async def test_a_shared_retriever_keeps_each_call_manifest_with_its_documents() -> None:
    retriever = as_retriever(graph())
    queries = [FACTUAL, BROAD, "what is the default port setting?"]
    collectors = [ManifestCollector() for _ in queries]
    results = await retriever.abatch(queries, config=[{"callbacks": [c]} for c in collectors])
    for query, docs, collector in zip(queries, results, collectors, strict=True):
        assert docs
        (manifest,) = collector.manifests
        assert manifest["rerank_query"] == query
        assert {d.metadata[RUN_ID_KEY] for d in docs} == {manifest["run_id"]}
    assert len({c.manifests[0]["run_id"] for c in collectors}) == 3


def test_retriever_defaults_reach_every_turn() -> None:
    ts = tiers(tenant="acme", namespace="tenant-a")
    retriever = as_retriever(graph(tiers=ts), namespace="tenant-a", tenant="acme", tags=["docs"])
    assert isinstance(retriever, RagtillerRetriever)
    collector = ManifestCollector()
    assert retriever.invoke(FACTUAL, config={"callbacks": [collector]})
    assert ts[0].calls[0]["namespaces"] == ["tenant-a"]
    assert ts[0].calls[0]["filter"] == {"tenant": "acme"}
    assert collector.manifests[0]["selected_namespaces"] == ["tenant-a"]


def test_retriever_rejects_an_unknown_default() -> None:
    with pytest.raises(ValidationError, match="namspace"):
        as_retriever(graph(), namspace="typo")


def test_a_turn_without_retrieval_returns_no_documents() -> None:
    assert as_retriever(graph()).invoke("hi") == []


def test_retriever_composes_in_a_chain() -> None:
    chain = as_retriever(graph()) | RunnableLambda(
        lambda docs: [d.metadata["citation"] for d in docs]
    )
    assert chain.invoke(FACTUAL)[0] == 1


def test_a_graph_that_is_not_ragtiller_is_a_clear_error() -> None:
    other = RunnableLambda(lambda inputs: {"answer": inputs["query"]})
    with pytest.raises(ConfigurationError, match=r"output was \['answer'\]"):
        as_retriever(other).invoke(FACTUAL)


# --- tool ----------------------------------------------------------------------------------


def tool_call(query: str) -> dict[str, Any]:
    return {"type": "tool_call", "name": "search_docs", "args": {"query": query}, "id": "call-1"}


def test_tool_returns_cited_context_and_an_artifact_with_documents_and_manifest() -> None:
    tool = as_tool(graph())
    assert tool.name == "search_docs"
    assert tool.response_format == "content_and_artifact"
    assert set(tool.args) == {"query"}
    message = tool.invoke(tool_call(FACTUAL))
    assert isinstance(message, ToolMessage)
    assert message.content.startswith("[1] ")
    assert "port setting number" in message.content
    assert set(message.artifact) == {"documents", "manifest"}
    assert all(isinstance(d, Document) for d in message.artifact["documents"])
    assert message.artifact["manifest"]["query_type"] == "factual_lookup"
    assert json.loads(json.dumps(message.artifact["manifest"])) == message.artifact["manifest"]


async def test_tool_async_path_and_custom_name() -> None:
    tool = as_tool(graph(), name="search_manual", description="Search the manual.")
    message = await tool.ainvoke({**tool_call(FACTUAL), "name": "search_manual"})
    assert tool.description == "Search the manual."
    assert message.content.startswith("[1] ")
    assert message.artifact["manifest"]["rerank_query"] == FACTUAL


def test_tool_says_why_when_nothing_was_retrieved() -> None:
    message = as_tool(graph()).invoke(tool_call("hi"))
    assert message.content == "No documents retrieved (greeting)."
    assert message.artifact["documents"] == []
    assert message.artifact["manifest"]["no_retrieval_reason"] == "greeting"


def test_tool_defaults_reach_every_turn() -> None:
    ts = tiers()
    as_tool(graph(tiers=ts), namespace=["a", "b"], tenant="acme").invoke(tool_call(FACTUAL))
    assert ts[0].calls[0]["namespaces"] == ["a", "b"]
    assert ts[0].calls[0]["filter"] == {"tenant": "acme"}


class ToolCallingFakeModel(GenericFakeChatModel):
    """Replies from a script, accepts ``bind_tools``, and records what it was shown."""

    seen: list[list[BaseMessage]] = Field(default_factory=list)

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ToolCallingFakeModel:  # type: ignore[override]
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.seen.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


def scripted_model(query: str) -> ToolCallingFakeModel:
    return ToolCallingFakeModel(
        messages=iter(
            [
                AIMessage(
                    "",
                    tool_calls=[{"name": "search_docs", "args": {"query": query}, "id": "call-1"}],
                ),
                AIMessage("The default port is in [1]."),
            ]
        ),
    )


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_an_agent_calls_the_tool_and_reads_the_cited_context(mode: str) -> None:
    model = scripted_model(FACTUAL)
    agent = create_agent(model, [as_tool(graph())])
    inputs = {"messages": [HumanMessage("Which port is the default?")]}
    out = agent.invoke(inputs) if mode == "sync" else await agent.ainvoke(inputs)
    tool_messages = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert len(tool_messages) == 1
    result = tool_messages[0]
    assert result.name == "search_docs" and result.tool_call_id == "call-1"
    assert result.content.startswith("[1] ")
    assert result.artifact["manifest"]["query_type"] == "factual_lookup"
    assert result.artifact["manifest"]["rerank_query"] == FACTUAL
    assert ids(result.artifact["documents"])[0] == result.artifact["manifest"]["reranked"][0]["id"]
    shown = model.seen[-1][-1]  # the model's second call sees the tool's content, not the artifact
    assert isinstance(shown, ToolMessage) and shown.content == result.content
    assert out["messages"][-1].content == "The default port is in [1]."


# --- subgraph ------------------------------------------------------------------------------


class SharedKeysState(TypedDict, total=False):
    """A parent whose keys match the graph's input and output: the graph can be a node as is."""

    query: str
    documents: list[Document]
    context: str
    manifest: RunManifest
    answer: str


def answer(state: SharedKeysState) -> dict[str, Any]:
    return {"answer": f"{len(state['documents'])} passages; first: {state['context'][:3]}"}


def test_graph_as_a_node_with_shared_keys() -> None:
    parent = StateGraph(SharedKeysState)
    parent.add_node("retrieve", graph())
    parent.add_node("answer", answer)
    parent.add_edge(START, "retrieve")
    parent.add_edge("retrieve", "answer")
    parent.add_edge("answer", END)
    app = parent.compile()
    out = app.invoke({"query": FACTUAL})
    assert set(out) == {"query", "documents", "context", "manifest", "answer"}
    assert out["answer"].endswith("first: [1]")
    assert isinstance(out["manifest"], RunManifest)
    assert "embed_query" not in out  # internal fields stay inside the subgraph
    events = [
        event
        for namespace, event in app.stream({"query": FACTUAL}, stream_mode="custom", subgraphs=True)
        if namespace and namespace[0].startswith("retrieve:")
    ]
    assert {e["step"] for e in events} == set(STAGES)


async def test_graph_as_a_node_under_a_checkpointed_parent() -> None:
    parent = StateGraph(SharedKeysState)
    parent.add_node("retrieve", graph())
    parent.add_edge(START, "retrieve")
    serde = checkpoint_serde()
    app = parent.compile(checkpointer=InMemorySaver(serde=serde))
    config: Any = {"configurable": {"thread_id": "parent-1"}}
    await app.ainvoke({"query": FACTUAL}, config)
    await app.ainvoke({"query": BROAD}, config)
    saved = (await app.aget_state(config)).values
    assert saved["manifest"].rerank_query == BROAD
    assert saved["manifest"].query_type != "no_retrieval"


class ChatState(TypedDict, total=False):
    """A parent with its own names: a wrapper node maps them onto the graph's."""

    question: str
    tenant_id: str
    sources: list[Document]
    retrieval_notes: list[str]


def test_graph_called_from_a_parent_node_with_mapped_keys() -> None:
    ts = tiers(tenant="acme")
    rag = graph(tiers=ts)

    def retrieve(state: ChatState) -> dict[str, Any]:
        out = rag.invoke({"query": state["question"], "tenant": state["tenant_id"]})
        return {"sources": out["documents"], "retrieval_notes": out["manifest"].degraded}

    parent = StateGraph(ChatState)
    parent.add_node("retrieve", retrieve)
    parent.add_edge(START, "retrieve")
    out = parent.compile().invoke({"question": FACTUAL, "tenant_id": "acme"})
    direct = rag.invoke({"query": FACTUAL, "tenant": "acme"})
    assert ids(out["sources"]) == ids(direct["documents"]) and out["sources"]
    assert out["retrieval_notes"] == direct["manifest"].degraded
    assert ts[0].calls[0]["filter"] == {"tenant": "acme"}


# --- LangChain's settings: k and search_kwargs --------------------------------------------


def test_retriever_k_and_search_kwargs_set_the_number_of_documents() -> None:
    g = graph(tiers=[StaticTier("dense", [hit("dense", f"c{i}", 1 - i / 20) for i in range(8)])])
    assert len(as_retriever(g).invoke(FACTUAL)) == 5  # the factual route's top_k
    assert len(as_retriever(g, k=3).invoke(FACTUAL)) == 3
    by_kwargs = as_retriever(g, search_kwargs={"k": 2, "rerank": "off"})
    collector = ManifestCollector()
    assert len(by_kwargs.invoke(FACTUAL, config={"callbacks": [collector]})) == 2
    assert collector.manifests[0]["overrides"] == {"top_k": 2, "rerank": "off"}
    assert len(by_kwargs.invoke(FACTUAL, k=1)) == 1  # per call, as LangChain retrievers allow
    assert len(as_retriever(g, k=3, search_kwargs={"k": 1}).invoke(FACTUAL)) == 3  # k wins


async def test_retriever_k_on_the_async_path() -> None:
    g = graph(tiers=[StaticTier("dense", [hit("dense", f"c{i}", 1 - i / 20) for i in range(8)])])
    assert len(await as_retriever(g, search_kwargs={"k": 2}).ainvoke(FACTUAL)) == 2


@pytest.mark.parametrize(
    ("settings", "match"),
    [
        ({"search_kwargs": {"kk": 2}}, r"unknown search_kwargs 'kk'; accepted: k, policy, top_k"),
        ({"search_kwargs": {"k": 0}}, r"top_k: Input should be greater than 0"),
        ({"k": -1}, r"top_k: Input should be greater than 0"),
    ],
)
def test_retriever_checks_its_settings_when_made(settings: dict[str, Any], match: str) -> None:
    with pytest.raises(ValidationError, match=match):
        as_retriever(graph(), **settings)


def test_tool_k_and_search_kwargs() -> None:
    g = graph(tiers=[StaticTier("dense", [hit("dense", f"c{i}", 1 - i / 20) for i in range(8)])])
    message = as_tool(g, k=2).invoke(
        {"type": "tool_call", "id": "c1", "name": "search_docs", "args": {"query": FACTUAL}}
    )
    assert len(message.artifact["documents"]) == 2
    assert message.artifact["manifest"]["overrides"] == {"top_k": 2}
    with pytest.raises(InputError, match=r"filter: .*key 'tenant' has its own field"):
        as_tool(g, search_kwargs={"filter": {"tenant": "acme"}})  # never a second tenant path
    with pytest.raises(InputError, match=r"unknown search_kwargs 'where'"):
        as_tool(g, search_kwargs={"where": {"kind": "faq"}})


class AgentState(MessagesState, total=False):
    """A ``MessagesState`` agent that also keeps what retrieval returned."""

    documents: list[Document]
    context: str


def test_graph_drops_into_a_messages_state_agent() -> None:
    parent = StateGraph(AgentState)
    parent.add_node("retrieve", graph())
    parent.add_edge(START, "retrieve")
    out = parent.compile().invoke(
        {"messages": [HumanMessage("hello"), AIMessage("hi"), HumanMessage(FACTUAL)]}
    )
    assert out["documents"] and out["context"].startswith("[1] ")
    *history, answer = out["messages"]
    assert [m.text for m in history] == ["hello", "hi", FACTUAL]  # the agent's history is kept
    assert isinstance(answer, AIMessage) and answer.text == out["context"]


def test_the_cli_citations_say_which_score_they_print() -> None:
    """Issue 44, item 7: ``[1] (1.740)`` above ``[2] (4.727)`` read as scores out of order."""
    from ragtiller.integrations.display import citations

    def doc(n: int, fused: float, final: float) -> Document:
        meta = {"citation": n, "source": f"s{n}", "doc_id": "d", "fused_score": fused}
        return Document(page_content="text", metadata={**meta, "final_score": final})

    floor = citations([doc(1, 1.74, 1.74), doc(2, 4.727, 4.727)]).splitlines()
    assert "(fused 1.740)" in floor[0] and "(fused 4.727)" in floor[1]
    assert "(rerank 0.900)" in citations([doc(1, 1.74, 0.9)])
