"""Default deny across tenants: no text of tenant A, or of a namespace a turn did not ask for,
reaches a tenant-B turn by any path out of it.

The paths a turn's text takes out: its documents, its context (corpus overview and labels
included), its manifest and stage records, the events it streams, the agent tool's content and
the retriever's documents. Every test here asks as ``globex`` on an index that also holds
``acme``'s documents and a namespace nobody asked for, and looks for their marker words on each
path.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import ValidationError

from ragtiller import InputError, build_graph
from ragtiller.cli.exit_codes import EXIT_USAGE
from ragtiller.index import EmbeddedIndex
from ragtiller.ingest import build_index
from ragtiller.integrations.langchain import ManifestCollector, as_retriever, as_tool
from ragtiller.models import HashingEmbedder

BROAD = "give me an overview of the handbook"
FACTUAL = "which port does the server listen on"
FOREIGN = ("zebrafoil", "acme handbook", "otterquill", "vault handbook")
"""Words only acme's documents and the unrequested ``vault`` namespace hold."""


def _doc(source: str, text: str, **metadata: Any) -> Document:
    return Document(page_content=text, metadata={"source": source, **metadata})


@pytest.fixture(scope="module")
def index() -> EmbeddedIndex:
    return build_index(
        [
            _doc(
                "acme.md",
                "# Acme handbook\n\nZebrafoil is the acme server. It listens on port 7000.",
                tenant="acme",
            ),
            _doc(
                "globex.md",
                "# Globex handbook\n\nThe globex server listens on port 8000 by default.",
                tenant="globex",
            ),
            _doc(
                "vault.md",
                "# Vault handbook\n\nOtterquill keeps the vault server on port 9000.",
                tenant="globex",
                namespace="vault",
            ),
        ],
        embedder=HashingEmbedder(dim=64),
        progress=False,
    )


@pytest.fixture(scope="module")
def graph(index: EmbeddedIndex) -> Any:
    return build_graph(index=index)  # no chat model: step-back never runs, the overview does


def leaked(text: str) -> list[str]:
    lowered = text.lower()
    return [word for word in FOREIGN if word in lowered]


def everything(out: dict[str, Any]) -> str:
    """Every text a turn returns, in one string."""
    return json.dumps(
        {
            "documents": [(d.page_content, d.metadata) for d in out["documents"]],
            "context": out["context"],
            "manifest": out["manifest"].model_dump(mode="json"),
            "stages": out["stages"],
        },
        default=str,
    )


@pytest.mark.parametrize("query", [BROAD, FACTUAL, "how do I get started?", "what is a server?"])
def test_a_turn_as_globex_carries_nothing_of_acme_or_of_another_namespace(
    graph: Any, query: str
) -> None:
    out = graph.invoke({"query": query, "tenant": "globex"})
    assert leaked(everything(out)) == []
    assert all(d.metadata["tenant"] == "globex" for d in out["documents"])


def test_the_corpus_overview_of_a_broad_turn_lists_only_the_tenants_own_documents(
    graph: Any,
) -> None:
    out = graph.invoke({"query": BROAD}, context={"tenant": "globex"})
    assert "<project-overview>" in out["context"]
    overview = out["context"].split("<project-overview>")[1]
    assert "Globex handbook" in overview
    assert leaked(overview) == []
    acme = graph.invoke({"query": BROAD}, context={"tenant": "acme"})
    assert "Acme handbook" in acme["context"] and "globex" not in acme["context"].lower()


async def test_streamed_events_of_a_globex_turn_carry_nothing_of_acme(graph: Any) -> None:
    events = [
        e async for e in graph.astream_events({"query": BROAD, "tenant": "globex"}, version="v2")
    ]
    assert leaked(json.dumps([e.get("data") for e in events], default=str)) == []


def test_agent_tool_and_retriever_as_globex_carry_nothing_of_acme(graph: Any) -> None:
    tool = as_tool(graph, tenant="globex")
    content = tool.invoke({"query": BROAD})
    assert leaked(str(content)) == []
    collector = ManifestCollector()
    docs = as_retriever(graph, tenant="globex").invoke(BROAD, config={"callbacks": [collector]})
    assert docs
    assert leaked(json.dumps([(d.page_content, d.metadata) for d in docs], default=str)) == []
    assert collector.manifests and leaked(json.dumps(collector.manifests)) == []


def test_a_fixed_overview_text_is_shown_only_on_turns_without_a_tenant(
    index: EmbeddedIndex,
) -> None:
    g = build_graph(index=index, corpus_map="Acme handbook: zebrafoil")
    open_turn = g.invoke({"query": BROAD})
    assert "<project-overview>\nAcme handbook: zebrafoil" in open_turn["context"]
    scoped = g.invoke({"query": BROAD, "tenant": "globex"})
    assert leaked(everything(scoped)) == []
    assert "corpus overview left out: it cannot be limited to tenant 'globex'" in (
        scoped["manifest"].degraded
    )


# --- a tenant or namespace that names nobody is refused, never read as "no filter" --------

BLANK = ["", " ", "\t\n"]


@pytest.mark.parametrize("value", BLANK)
@pytest.mark.parametrize("field", ["tenant", "namespace"])
def test_a_blank_tenant_or_namespace_in_the_input_is_an_input_error(
    graph: Any, field: str, value: str
) -> None:
    with pytest.raises(InputError, match=f"input '{field}' must not be empty or blank"):
        graph.invoke({"query": FACTUAL, field: value})


@pytest.mark.parametrize("value", BLANK)
@pytest.mark.parametrize("field", ["tenant", "namespace"])
def test_a_blank_tenant_or_namespace_in_the_context_is_an_input_error(
    graph: Any, field: str, value: str
) -> None:
    with pytest.raises(InputError, match=f"{field}: Value error, must not be empty or blank"):
        graph.invoke({"query": FACTUAL}, context={field: value})


def test_an_empty_namespace_list_is_an_input_error(graph: Any) -> None:
    with pytest.raises(InputError, match="must name at least one namespace"):
        graph.invoke({"query": FACTUAL, "namespace": []})
    with pytest.raises(InputError, match="must name at least one namespace"):
        graph.invoke({"query": FACTUAL}, context={"namespace": []})
    with pytest.raises(InputError, match="must not be empty or blank"):
        graph.invoke({"query": FACTUAL}, context={"namespace": ["default", ""]})


def test_a_blank_tenant_given_to_the_retriever_or_tool_is_refused(graph: Any) -> None:
    with pytest.raises(ValidationError, match="must not be empty or blank"):
        as_retriever(graph, tenant="")
    with pytest.raises(ValidationError, match="must not be empty or blank"):
        as_retriever(graph, search_kwargs={"tenant": " "})
    with pytest.raises(InputError, match="must not be empty or blank"):
        as_retriever(graph).invoke(FACTUAL, tenant="")
    with pytest.raises(InputError, match="must not be empty or blank"):
        as_tool(graph, tenant="")


def test_ask_with_a_blank_tenant_exits_with_the_usage_code(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.md").write_text("# Ports\n\nThe server listens on port 8000.\n", "utf-8")
    index_dir = tmp_path / "index"
    run = [sys.executable, "-m", "ragtiller"]
    ingest = [*run, "ingest", str(corpus), "--index", str(index_dir), "--embedder", "hashing"]
    subprocess.run([*ingest, "--quiet"], check=True, capture_output=True, timeout=300)
    asked = subprocess.run(
        [*run, "ask", FACTUAL, "--index", str(index_dir), "--tenant", ""],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert asked.returncode == EXIT_USAGE, asked.stderr
    assert "tenant" in asked.stderr and "must not be empty or blank" in asked.stderr
    assert "port 8000" not in asked.stdout


# --- tenant and namespace are the turn's own, never the thread's ---------------------------


def thread_graph(index: EmbeddedIndex) -> tuple[Any, dict[str, Any]]:
    return build_graph(index=index, checkpointer=InMemorySaver()), {
        "configurable": {"thread_id": "t1"}
    }


def tenants(out: dict[str, Any]) -> set[str]:
    return {d.metadata["tenant"] for d in out["documents"]}


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_turn_on_a_thread_does_not_inherit_the_previous_turns_tenant(
    index: EmbeddedIndex, mode: str
) -> None:
    g, config = thread_graph(index)

    async def turn(payload: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        if mode == "sync":
            return g.invoke(payload, config, **kwargs)  # type: ignore[no-any-return]
        return await g.ainvoke(payload, config, **kwargs)  # type: ignore[no-any-return]

    first = await turn({"query": FACTUAL, "tenant": "acme"})
    assert tenants(first) == {"acme"} and first["manifest"].tenant == "acme"
    open_turn = await turn({"query": FACTUAL})
    assert open_turn["manifest"].tenant is None
    assert tenants(open_turn) == {"acme", "globex"}
    globex = await turn({"query": FACTUAL}, context={"tenant": "globex"})
    assert tenants(globex) == {"globex"}
    assert globex["manifest"].tenant == "globex"
    assert leaked(everything(globex)) == []


def test_a_turn_on_a_thread_does_not_inherit_the_previous_turns_namespace(
    index: EmbeddedIndex,
) -> None:
    g, config = thread_graph(index)
    vault = g.invoke({"query": FACTUAL, "namespace": "vault"}, config)
    assert {d.metadata["namespace"] for d in vault["documents"]} == {"vault"}
    after = g.invoke({"query": FACTUAL, "tenant": "globex"}, config)
    assert after["manifest"].selected_namespaces == ["default"]
    assert leaked(everything(after)) == []


def test_the_context_wins_over_the_input_and_the_manifest_says_what_was_used(
    graph: Any,
) -> None:
    out = graph.invoke({"query": FACTUAL, "tenant": "acme"}, context={"tenant": "globex"})
    assert tenants(out) == {"globex"}
    assert out["manifest"].tenant == "globex"
    assert out["manifest"].overrides == {"tenant": "globex"}
    assert leaked(everything(out)) == []


# --- what a caller sends is bounded in what a turn returns ---------------------------------


def test_too_many_namespaces_are_refused(graph: Any) -> None:
    many = [f"ns{i}" for i in range(10_000)]
    with pytest.raises(InputError, match="names 10000 namespaces; at most 64"):
        graph.invoke({"query": FACTUAL, "namespace": many})
    with pytest.raises(InputError, match="names 10000 namespaces; at most 64"):
        graph.invoke({"query": FACTUAL}, context={"namespace": many})


def test_a_huge_query_is_not_copied_into_the_manifest(graph: Any) -> None:
    query = "which port " * 1_000_000  # 11 MB
    out = graph.invoke({"query": query})
    manifest = out["manifest"]
    assert manifest.query_truncated
    assert len(manifest.model_dump_json()) < 100_000
    assert sum(len(m.text) for m in out["messages"]) < 100_000 + len(out["context"])


@pytest.mark.parametrize("query", ["🙂🙂🙂", "?!...", "\u200b\u200b", "— · —"])
def test_a_query_with_no_words_retrieves_nothing_and_says_why(graph: Any, query: str) -> None:
    out = graph.invoke({"query": query})
    assert out["documents"] == []
    assert out["manifest"].no_retrieval_reason == "no-words"
