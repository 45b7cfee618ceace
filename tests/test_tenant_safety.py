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
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import ValidationError

from ragtiller import InputError, build_graph
from ragtiller.cli.app import EXIT_USAGE
from ragtiller.index import EmbeddedIndex
from ragtiller.ingest import build_index
from ragtiller.integrations.langchain import ManifestCollector, as_retriever, as_tool
from ragtiller.models import HashingEmbedder
from ragtiller.nodes.scope import SENT_FROM_OUTSIDE

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


def test_a_fixed_overview_text_is_shown_only_on_turns_that_may_search_everything(
    index: EmbeddedIndex,
) -> None:
    g = build_graph(index=index, corpus_map="Acme handbook: zebrafoil", require_tenant=False)
    everywhere = g.invoke({"query": BROAD, "namespace": ["default", "vault"]})
    assert "<project-overview>\nAcme handbook: zebrafoil" in everywhere["context"]
    one_namespace = g.invoke({"query": BROAD})  # the route's: default only
    assert "zebrafoil" not in one_namespace["context"]
    assert "corpus overview left out: it cannot be limited to namespaces default" in (
        one_namespace["manifest"].degraded
    )
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


@pytest.mark.parametrize("field", ["tenant", "namespace"])
def test_a_lone_surrogate_in_an_input_name_is_an_input_error(graph: Any, field: str) -> None:
    """A name no JSON encoder can carry never reaches the manifest or the checkpoint."""
    with pytest.raises(InputError, match=f"input '{field}' holds an undecodable character"):
        graph.invoke({"query": FACTUAL, field: "acme\udc80"})


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


# --- a thread keeps one scope: another tenant's turn on it is refused ---------------------


def thread_graph(index: EmbeddedIndex) -> tuple[Any, dict[str, Any]]:
    return build_graph(index=index, checkpointer=InMemorySaver()), {
        "configurable": {"thread_id": "t1"}
    }


def tenants(out: dict[str, Any]) -> set[str]:
    return {d.metadata["tenant"] for d in out["documents"]}


THREAD_REFUSED = "this thread was started with another tenant, namespace or filter"


def refused_without_names(error: pytest.ExceptionInfo[InputError]) -> None:
    message = str(error.value)
    assert THREAD_REFUSED in message
    assert "acme" not in message and "globex" not in message and "vault" not in message


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize(
    "second",
    [
        {"input": {"tenant": "globex"}},
        {"context": {"tenant": "globex"}},
        {"config": {"ragtiller": {"tenant": "globex"}}},
        {"input": {}},  # unscoped: every tenant's documents
        {"input": {"tenant": "acme", "namespace": "vault"}},
    ],
    ids=["input", "context", "configurable", "unscoped", "namespace"],
)
async def test_a_thread_started_by_acme_refuses_a_turn_of_another_scope(
    index: EmbeddedIndex, mode: str, second: dict[str, Any]
) -> None:
    """The thread's transcript holds acme's answer: a turn of any other scope on it would be
    handed that text in its ``messages``, so it is refused (naming no tenant)."""
    g, config = thread_graph(index)
    payload = {"query": FACTUAL, **second.get("input", {})}
    run_config = {"configurable": {**config["configurable"], **second.get("config", {})}}
    kwargs = {"context": second["context"]} if "context" in second else {}

    async def turn(payload: dict[str, Any], config: Any, **kwargs: Any) -> dict[str, Any]:
        if mode == "sync":
            return g.invoke(payload, config, **kwargs)  # type: ignore[no-any-return]
        return await g.ainvoke(payload, config, **kwargs)  # type: ignore[no-any-return]

    first = await turn({"query": FACTUAL, "tenant": "acme"}, config)
    assert tenants(first) == {"acme"}
    with pytest.raises(InputError) as refused:
        await turn(payload, run_config, **kwargs)
    refused_without_names(refused)
    again = await turn({"query": BROAD}, config, context={"tenant": "acme"})  # the same scope
    assert tenants(again) == {"acme"}
    plain = build_graph(index=index).invoke({"query": BROAD, "tenant": "acme"})
    assert [d.page_content for d in again["documents"]] == [
        d.page_content for d in plain["documents"]
    ]


def test_a_chat_thread_of_acme_refuses_a_globex_turn(index: EmbeddedIndex) -> None:
    g, config = thread_graph(index)
    g.invoke({"messages": [("user", FACTUAL)]}, config, context={"tenant": "acme"})
    with pytest.raises(InputError) as refused:
        g.invoke({"messages": [("user", "and the vault?")]}, config, context={"tenant": "globex"})
    refused_without_names(refused)
    transcript = g.get_state(config).values["messages"]
    assert len(transcript) == 2  # the refused turn wrote no answer


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_the_compiled_graph_the_server_runs_refuses_before_streaming_anything(
    index: EmbeddedIndex, mode: str
) -> None:
    """The Studio factories serve ``build_graph(...).graph``, LangGraph's own compiled graph:
    its input step refuses another scope's chat turn before a ``values`` chunk (the thread's
    earlier answer) is streamed or the question joins the transcript, and an unknown key."""
    compiled = build_graph(index=index, checkpointer=InMemorySaver()).graph
    config: Any = {"configurable": {"thread_id": f"server-{mode}"}}
    first = {"messages": [("user", FACTUAL)]}
    other = {"messages": [("user", "and the vault?")]}

    async def chunks(payload: Any, tenant: str) -> list[Any]:
        kwargs: dict[str, Any] = {"context": {"tenant": tenant}, "stream_mode": "values"}
        if mode == "sync":
            return list(compiled.stream(payload, config, **kwargs))
        return [c async for c in compiled.astream(payload, config, **kwargs)]

    assert await chunks(first, "acme")
    streamed: list[Any] = []
    with pytest.raises(InputError) as refused:
        if mode == "sync":
            streamed.extend(compiled.stream(other, config, context={"tenant": "globex"}))
        else:
            async for chunk in compiled.astream(other, config, context={"tenant": "globex"}):
                streamed.append(chunk)
    assert streamed == []
    refused_without_names(refused)
    assert len(compiled.get_state(config).values["messages"]) == 2
    with pytest.raises(InputError, match="unknown input key"):
        await chunks({"question": FACTUAL}, "acme")
    again = await chunks({"messages": [("user", BROAD)]}, "acme")  # the same scope goes on
    assert tenants({"documents": again[-1]["documents"]}) == {"acme"}


RESUME_REFUSED = "this run's tenant, namespace or filter differs from the paused turn's"


@pytest.mark.parametrize("node", ["embed", "tier_search", "fuse", "assemble"])
def test_a_paused_acme_turn_resumed_as_globex_is_refused(index: EmbeddedIndex, node: str) -> None:
    g = build_graph(index=index, checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": f"paused-{node}"}}
    g.invoke({"query": FACTUAL}, config, context={"tenant": "acme"}, interrupt_before=[node])
    assert g.get_state(config).next
    with pytest.raises(InputError, match="differs from the paused turn's") as refused:
        g.invoke(None, config, context={"tenant": "globex"})
    assert "acme" not in str(refused.value)
    resumed = g.invoke(None, config, context={"tenant": "acme"})
    assert tenants(resumed) == {"acme"}


@pytest.mark.parametrize(
    "edit",
    [{"tenant": "acme"}, {"tenant": None, "namespaces": ["default", "vault"]}],
    ids=["other-tenant", "unscoped-every-namespace"],
)
@pytest.mark.parametrize("pinned", [{"tenant": "globex"}, None], ids=["pinned", "not-pinned"])
def test_a_route_rewritten_while_paused_is_refused(
    index: EmbeddedIndex, edit: dict[str, Any], pinned: dict[str, Any] | None
) -> None:
    """A client that may write a thread's state (``update_state``, Studio's state editor)
    cannot widen a paused turn, whether or not the deployment pins its tenant: the route's
    scope is sealed by the gate, and the resume is refused naming neither scope."""
    g = build_graph(index=index, checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": f"edited-{pinned is None}"}}
    payload = {"query": FACTUAL, **({} if pinned else {"tenant": "globex"})}
    g.invoke(payload, config, context=pinned, interrupt_before=["embed"])
    route = g.get_state(config).values["route"]
    g.update_state(config, {"route": {**route, **edit}})
    with pytest.raises(InputError, match=re.escape(SENT_FROM_OUTSIDE)) as refused:
        g.invoke(None, config, context=pinned)
    assert "globex" not in str(refused.value) and "acme" not in str(refused.value)


# --- pins: RetrievalGraph.with_config(configurable={"ragtiller": ...}) -----------------------

PINNED = "this graph pins"


def pinned_graph(index: EmbeddedIndex, **parts: Any) -> Any:
    return build_graph(index=index, **parts).with_config(
        configurable={"ragtiller": {"tenant": "globex", "namespace": "default"}}
    )


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize(
    "door",
    [
        {"input": {"tenant": "acme"}},
        {"input": {"namespace": "vault"}},
        {"context": {"tenant": "acme"}},
        {"context": {"namespace": ["default", "vault"]}},
        {"config": {"configurable": {"ragtiller": {"tenant": "acme"}}}},
        {"config": {"configurable": {"ragtiller": {"namespace": "vault", "top_k": 2}}}},
    ],
    ids=["input-tenant", "input-namespace", "context", "context-namespace", "configurable",
         "configurable-namespace"],
)  # fmt: skip
@pytest.mark.parametrize("served", [False, True], ids=["graph", "compiled"])
async def test_a_pinned_scope_refuses_a_callers_other_one_through_every_door(
    index: EmbeddedIndex, mode: str, door: dict[str, Any], served: bool
) -> None:
    """The pin is built into the graph's nodes, so it holds on the compiled graph the Studio
    factories serve (``.graph``) too, and a caller's ``configurable["ragtiller"]``, which
    LangGraph's shallow merge would put in the place of a bound one, is refused."""
    g = pinned_graph(index)
    runner = g.graph if served else g
    payload = {"query": FACTUAL, **door.get("input", {})}
    kwargs = {"context": door["context"]} if "context" in door else {}
    with pytest.raises(InputError, match=PINNED) as refused:
        if mode == "sync":
            runner.invoke(payload, door.get("config"), **kwargs)
        else:
            await runner.ainvoke(payload, door.get("config"), **kwargs)
    assert leaked(str(refused.value)) == [] and "globex" not in str(refused.value)


def test_a_pinned_graph_takes_the_callers_other_settings_and_more_filter_keys(
    index: EmbeddedIndex,
) -> None:
    g = build_graph(index=index).with_config(
        configurable={"ragtiller": {"tenant": "globex", "filter": {"source": "globex.md"}}}
    )
    own = g.invoke({"query": FACTUAL, "tenant": "globex"}, context={"top_k": 1})
    assert tenants(own) == {"globex"} and len(own["documents"]) == 1
    assert own["manifest"].overrides["filter"] == {"source": "globex.md"}
    added = {"source": "globex.md", "doc_id": "globex.md"}
    narrower = g.invoke({"query": FACTUAL}, context={"filter": added})
    assert narrower["manifest"].overrides["filter"] == added and tenants(narrower) == {"globex"}
    with pytest.raises(InputError, match=PINNED):
        g.invoke({"query": FACTUAL}, context={"filter": {"source": "acme.md"}})
    more = g.with_config(configurable={"ragtiller": {"top_k": 1}})
    assert more.invoke({"query": FACTUAL})["manifest"].overrides["top_k"] == 1
    with pytest.raises(InputError, match=PINNED):
        more.invoke({"query": FACTUAL}, context={"top_k": 2})
    with pytest.raises(InputError, match=PINNED):
        g.with_config(configurable={"ragtiller": {"tenant": "acme"}})  # a pin is never moved


def test_a_pinned_turn_on_a_thread_and_resumed_from_a_breakpoint_keeps_its_pin(
    index: EmbeddedIndex,
) -> None:
    """Every node applies the pin, so a later turn and a resume that pass nothing run under
    it, and a caller cannot reach the gate with a tenant of its own through a ``Command``."""
    from langgraph.types import Command

    g = pinned_graph(index, checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "pinned"}}
    assert tenants(g.invoke({"query": FACTUAL}, config)) == {"globex"}
    g.invoke({"query": BROAD}, config, interrupt_before=["tier_search"])
    resumed = g.invoke(None, config)
    assert tenants(resumed) == {"globex"} and resumed["manifest"].tenant == "globex"
    assert leaked(everything(resumed)) == []
    with pytest.raises(InputError, match=PINNED):
        g.invoke(Command(update={"query": FACTUAL, "tenant": "acme"}, goto="gate"), config)


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


@pytest.mark.parametrize("field", ["tenant", "namespace"])
def test_a_huge_tenant_or_namespace_name_is_refused_not_echoed(graph: Any, field: str) -> None:
    huge = "t" * 1_000_000
    for call in (
        lambda: graph.invoke({"query": FACTUAL, field: huge}),
        lambda: graph.invoke({"query": FACTUAL}, context={field: huge}),
    ):
        with pytest.raises(
            InputError, match="is 1000000 characters long; a name has at most 256"
        ) as e:
            call()
        assert len(str(e.value)) < 2_000


def test_a_huge_query_is_not_copied_into_the_manifest(graph: Any) -> None:
    query = "which port " * 1_000_000  # 11 MB
    out = graph.invoke({"query": query, "tenant": "globex"})
    manifest = out["manifest"]
    assert manifest.query_truncated
    assert len(manifest.model_dump_json()) < 100_000
    assert sum(len(m.text) for m in out["messages"]) < 100_000 + len(out["context"])


@pytest.mark.parametrize("query", ["🙂🙂🙂", "?!...", "\u200b\u200b", "— · —"])
def test_a_query_with_no_words_retrieves_nothing_and_says_why(graph: Any, query: str) -> None:
    out = graph.invoke({"query": query, "tenant": "globex"})
    assert out["documents"] == []
    assert out["manifest"].no_retrieval_reason == "no-words"


# --- a tier that ignores the turn's scope cannot widen it ------------------------------------


def test_hits_of_another_tenant_or_namespace_from_a_careless_tier_are_dropped() -> None:
    """A custom tier is asked for globex in ``default`` and answers with everything it has:
    only globex's hit in ``default`` reaches the turn, and the label names no foreign value."""
    from fixtures.fakes import StaticTier, hit

    careless = StaticTier(
        "dense",
        [
            hit("dense", "a", 0.9, "Zebrafoil is the acme server.", tenant="acme"),
            hit(
                "dense", "v", 0.8, "Otterquill keeps the vault.", tenant="globex", namespace="vault"
            ),
            hit("dense", "g", 0.7, "The globex server listens on port 8000.", tenant="globex"),
        ],
    )
    g = build_graph(tiers=[careless], embedder=HashingEmbedder(dim=16))
    out = g.invoke({"query": FACTUAL, "tenant": "globex"})
    assert careless.calls[0]["filter"] == {"tenant": "globex"}
    assert [d.page_content for d in out["documents"]] == ["The globex server listens on port 8000."]
    assert leaked(everything(out)) == []
    assert "tier_search (dense) dropped 2 hits outside the turn's namespaces and filter" in (
        out["manifest"].degraded
    )


# --- an index of several tenants refuses a turn that names none (default deny) --------------


def test_an_index_whose_documents_carry_tenants_refuses_an_unscoped_turn(
    index: EmbeddedIndex, tmp_path: Path
) -> None:
    assert index.manifest.tenanted
    index.save(tmp_path / "idx")
    reopened = EmbeddedIndex.load(tmp_path / "idx", embedder=HashingEmbedder(dim=64))
    for source in (index, reopened):
        g = build_graph(index=source)
        calls: list[Callable[[Any], Any]] = [
            lambda g: g.invoke({"query": FACTUAL}),
            lambda g: g.invoke({"query": FACTUAL}, context={"top_k": 3}),
            lambda g: as_tool(g).invoke({"query": FACTUAL}),
            lambda g: as_retriever(g).invoke(FACTUAL),
        ]
        for call in calls:
            with pytest.raises(InputError, match="this graph serves several tenants"):
                call(g)
        assert tenants(g.invoke({"query": FACTUAL, "tenant": "globex"})) == {"globex"}
    everyone = build_graph(index=index, require_tenant=False).invoke({"query": FACTUAL})
    assert tenants(everyone) == {"acme", "globex"}


def test_an_index_without_tenants_serves_unscoped_turns() -> None:
    plain = build_index(
        [_doc("ports.md", "# Ports\n\nThe server listens on port 8000 by default.")],
        embedder=HashingEmbedder(dim=64),
        progress=False,
    )
    assert not plain.manifest.tenanted
    assert build_graph(index=plain).invoke({"query": FACTUAL})["documents"]


def test_ask_without_a_tenant_on_a_tenanted_index_says_how(
    index: EmbeddedIndex, tmp_path: Path
) -> None:
    index.save(tmp_path / "idx")
    asked = subprocess.run(
        [sys.executable, "-m", "ragtiller", "ask", FACTUAL, "--index", str(tmp_path / "idx")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert asked.returncode == EXIT_USAGE, asked.stderr
    assert "names none: pass input 'tenant'" in asked.stderr and "--tenant" in asked.stderr
    assert "port 8000" not in asked.stdout and "port 7000" not in asked.stdout


def test_a_step_back_cached_for_acme_tells_globex_nothing(index: EmbeddedIndex) -> None:
    """The generalization is cached per tenant: a globex turn never learns from ``from_cache``
    that acme asked the same question (and acme's next turn still reads its own entry)."""
    from fixtures.fakes import ScriptedChatModel

    model = ScriptedChatModel()
    g = build_graph(index=index, chat_model=model)
    question = "how do I get started with the server?"
    first = g.invoke({"query": question, "tenant": "acme"})["manifest"].step_back
    other = g.invoke({"query": question, "tenant": "globex"})["manifest"].step_back
    again = g.invoke({"query": question, "tenant": "acme"})["manifest"].step_back
    assert (first.status, first.from_cache) == ("done", False)
    assert (other.status, other.from_cache) == ("done", False)
    assert again.from_cache
    assert model.calls == 2


def test_a_retriever_made_for_globex_refuses_a_call_for_another_scope(graph: Any) -> None:
    """A shared retriever's tenant is the application's choice; a call's keyword arguments
    may narrow an unscoped retriever, never move a scoped one to another tenant."""
    for made in ({"tenant": "globex"}, {"search_kwargs": {"tenant": "globex"}}):
        retriever = as_retriever(graph, **made)
        for call in ({"tenant": "acme"}, {"search_kwargs": {"tenant": "acme"}}):
            kwargs = call.get("search_kwargs", call)
            with pytest.raises(InputError, match="this retriever was made for one tenant"):
                retriever.invoke(FACTUAL, **kwargs)
        docs = retriever.invoke(FACTUAL, tenant="globex", k=1)  # the same scope, another k
        assert len(docs) == 1 and docs[0].metadata["tenant"] == "globex"

    narrowed = as_retriever(graph).invoke(FACTUAL, tenant="acme")  # a call may name one
    assert {d.metadata["tenant"] for d in narrowed} == {"acme"}
