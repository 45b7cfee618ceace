"""The run context, the checked input, and namespaces and tenants that cannot match."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import yaml
from fixtures.fakes import ScriptedChatModel, StaticTier, hit
from langchain_core.documents import Document
from langchain_core.messages import AIMessage, HumanMessage

from ragtiller import ConfigurationError, InputError, build_graph, load_policy
from ragtiller.graph import per_run
from ragtiller.index import EmbeddedIndex
from ragtiller.ingest import build_index
from ragtiller.models import HashingEmbedder
from ragtiller.policies.run_context import RunContext, cached_policy

FACTUAL = "which port does the server listen on by default"
BROAD = "how do I get started with asyncio?"


def tiers(n: int = 12) -> list[StaticTier]:
    return [
        StaticTier(
            "dense",
            [hit("dense", f"c{i}", 0.99 - i / 100, text=f"port setting {i}") for i in range(n)],
        ),
        StaticTier(
            "lexical",
            [hit("lexical", f"c{i}", 9.0 - i / 10, text=f"port setting {i}") for i in range(n)],
            needs_vector=False,
        ),
    ]


def graph(**kwargs: Any) -> Any:
    kwargs.setdefault("tiers", tiers())
    return build_graph(require_tenant=False, embedder=HashingEmbedder(dim=16), **kwargs)


# --- the context ---------------------------------------------------------------------------


def test_top_k_from_the_context_or_configurable_sets_the_number_of_documents() -> None:
    g = graph()
    default = g.invoke({"query": FACTUAL})
    assert len(default["documents"]) == 5  # the default policy's factual_lookup top_k
    assert default["manifest"].overrides == {}
    two = g.invoke({"query": FACTUAL}, context={"top_k": 2})
    assert len(two["documents"]) == 2
    assert two["manifest"].overrides == {"top_k": 2}
    assert two["manifest"].top_k["final"] == 2
    three = g.invoke({"query": FACTUAL}, config={"configurable": {"ragtiller": {"top_k": 3}}})
    assert len(three["documents"]) == 3
    again = g.invoke({"query": FACTUAL})  # the override held for its own turn only
    assert len(again["documents"]) == 5


def test_top_k_above_max_chunks_is_capped_with_a_label() -> None:
    out = graph().invoke({"query": FACTUAL}, context={"top_k": 9, "max_chunks": 4})
    assert len(out["documents"]) == 4
    assert "top_k 9 capped to max_chunks 4" in out["manifest"].degraded
    assert out["manifest"].overrides == {"top_k": 9, "max_chunks": 4}


@pytest.mark.parametrize(
    ("context", "match"),
    [
        ({"top_k": 0}, r"top_k: Input should be greater than 0"),
        ({"top_k": "many"}, r"top_k: Input should be a valid integer"),
        ({"topk": 2}, r"topk: Extra inputs are not permitted[\s\S]*accepted fields: policy, top_k"),
        ({"rerank": "maybe"}, r"rerank: Input should be 'on', 'off' or 'ceiling'"),
        ({"step_back": True}, r"step_back: Input should be 'on' or 'off'"),
        (
            {"policy": "no-such-policy"},
            r"unknown policy 'no-such-policy'; allowed: default, no-llm",
        ),
    ],
)
def test_a_bad_context_value_is_an_input_error_naming_the_field(
    context: dict[str, Any], match: str
) -> None:
    with pytest.raises(InputError, match=match):
        graph().invoke({"query": FACTUAL}, context=context)


def test_policies_are_loaded_once_by_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert cached_policy("default") is cached_policy("default")
    variant = tmp_path / "variant.yaml"
    data = load_policy().model_dump(mode="json") | {"policy_id": "per-run-variant"}
    data["routes"]["factual_lookup"]["top_k"] = 1
    variant.write_text(yaml.safe_dump(data), "utf-8")
    monkeypatch.setenv("RAGTILLER_POLICY_DIR", str(tmp_path))
    g = graph()
    out = g.invoke({"query": FACTUAL}, context={"policy": "variant"})
    assert out["manifest"].policy_id == "per-run-variant"
    assert len(out["documents"]) == 1
    assert g.invoke({"query": FACTUAL})["manifest"].policy_id == "default-retrieval-policy"


def test_rerank_and_step_back_switches() -> None:
    g = graph(chat_model=ScriptedChatModel())
    off = g.invoke({"query": 'what does "port setting 3" mean'}, context={"rerank": "off"})
    assert off["manifest"].stage("rerank").reason == "route-floor"
    on = g.invoke({"query": FACTUAL}, context={"rerank": "on"})  # factual: off in the policy
    assert on["manifest"].stage("rerank").status == "done"
    ceiling = g.invoke({"query": FACTUAL}, context={"rerank": "ceiling"})
    assert "rerank ceiling requested but none is configured: floor only" in (
        ceiling["manifest"].degraded
    )
    assert g.invoke({"query": BROAD})["manifest"].step_back.status == "done"
    assert (
        g.invoke({"query": BROAD}, context={"step_back": "off"})["manifest"].step_back.reason
        == "disabled"
    )


async def test_concurrent_runs_keep_their_own_context() -> None:
    g = graph()
    outs = await asyncio.gather(
        *(g.ainvoke({"query": FACTUAL}, context={"top_k": k}) for k in (1, 2, 3, 4))
    )
    assert [len(o["documents"]) for o in outs] == [1, 2, 3, 4]


# --- the input -----------------------------------------------------------------------------

SHAPES = r'pass \{"query": "your question"\}'
NOT_MESSAGES = r"input 'messages' is not a list of chat messages"


@pytest.mark.parametrize(
    ("given", "match"),
    [
        ({"nope": 1}, r"unknown input key\(s\) 'nope'; " + SHAPES),
        ({"question": FACTUAL}, r"unknown input key\(s\) 'question'"),
        ({}, r"input 'query' is missing; " + SHAPES),
        ({"query": None}, r"input 'query' must be a str, got NoneType"),
        ({"query": 42}, r"input 'query' must be a str, got int: 42"),
        ({"messages": "hello"}, r"input 'messages' must be a list, got str"),
        ({"messages": [AIMessage("hi")]}, r"input 'messages' holds no human message"),
        ({"messages": [1, 2]}, NOT_MESSAGES),
        ({"messages": [{"role": "alien", "content": "x"}]}, NOT_MESSAGES),
        ({"messages": [("user", 5)]}, NOT_MESSAGES),
        ({"query": FACTUAL, "tenant": 7}, r"input 'tenant' must be a str, got int"),
    ],
)
async def test_wrong_input_raises_one_clear_error(given: dict[str, Any], match: str) -> None:
    g = graph()
    with pytest.raises(InputError, match=match):
        g.invoke(given)
    with pytest.raises(InputError, match=match):
        await g.ainvoke(given)


def test_messages_input_takes_the_last_human_message() -> None:
    g = graph()
    messages = [HumanMessage("hello"), AIMessage("hi, ask away"), HumanMessage(FACTUAL)]
    out = g.invoke({"messages": messages})
    assert out["manifest"].rerank_query == FACTUAL
    assert [d.id for d in out["documents"]] == [
        d.id for d in g.invoke({"query": FACTUAL})["documents"]
    ]
    as_tuples = g.invoke({"messages": [("user", FACTUAL)]})
    assert as_tuples["manifest"].query_type == "factual_lookup"


@pytest.mark.parametrize("query", ["", "   "])
def test_an_empty_query_still_answers_no_retrieval(query: str) -> None:
    out = graph().invoke({"query": query})
    assert out["manifest"].query_type == "no_retrieval"
    assert out["documents"] == []


# --- namespaces and tenants ------------------------------------------------------------------


@pytest.fixture(scope="module")
def tenant_index() -> EmbeddedIndex:
    docs = [
        Document(
            "# Ports\n\nThe server listens on port 8080 by default.",
            metadata={"source": "ports.md", "namespace": "docs", "tenant": "acme"},
        ),
        Document(
            "# Billing\n\nInvoices are sent monthly.",
            metadata={"source": "billing.md", "namespace": "faq", "tenant": "acme"},
        ),
    ]
    return build_index(docs, embedder=HashingEmbedder(), progress=False)


def routed_to(namespace: str) -> Any:
    data = load_policy().model_dump(mode="json")
    for route in data["routes"].values():
        route["namespace"] = namespace
    return data


def test_build_graph_checks_route_namespaces_against_the_index(
    tenant_index: EmbeddedIndex,
) -> None:
    from ragtiller.policies import parse_policy

    with pytest.raises(
        ConfigurationError,
        match=r"routes name namespaces the index does not hold \(factual_lookup: 'default'.*"
        r"the index holds: docs, faq",
    ):
        build_graph(index=tenant_index)
    assert build_graph(parse_policy(routed_to("docs")), index=tenant_index) is not None


def test_unknown_namespace_and_empty_tenant_are_labelled(tenant_index: EmbeddedIndex) -> None:
    from ragtiller.policies import parse_policy

    g = build_graph(parse_policy(routed_to("docs")), index=tenant_index)
    found = g.invoke({"query": "which port does the server listen on"}, context={"tenant": "acme"})
    assert found["documents"]
    assert all(label.startswith("assemble: ") for label in found["manifest"].degraded)

    elsewhere = g.invoke(
        {"query": "which port does the server listen on", "namespace": "nope", "tenant": "acme"}
    )
    assert elsewhere["documents"] == []
    # a tenant is not told which namespaces exist: another tenant's would look like one
    assert not any("not in the index" in label for label in elsewhere["manifest"].degraded)
    labels = elsewhere["manifest"].degraded
    assert any("within the turn's tenant 'acme'" in label for label in labels)
    # a caller who asks for a namespace the index lacks learns nothing of the others it holds
    shown = str(elsewhere["manifest"].model_dump()) + elsewhere["context"]
    assert "faq" not in shown

    nobody = g.invoke({"query": "which port does the server listen on"}, context={"tenant": "zed"})
    assert nobody["documents"] == []
    assert any(
        label.endswith(" within the turn's tenant 'zed', namespaces and filter")
        for label in nobody["manifest"].degraded
    )


def test_a_context_policy_with_an_unknown_namespace_fails_without_the_known_list(
    tenant_index: EmbeddedIndex, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ragtiller.policies import parse_policy

    g = build_graph(parse_policy(routed_to("docs")), index=tenant_index)
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(routed_to("wiki")), "utf-8")
    monkeypatch.setenv("RAGTILLER_POLICY_DIR", str(tmp_path))
    # the error reaches the run's caller: it names the route's namespace, not the index's others
    with pytest.raises(ConfigurationError, match=r"'wiki'") as refused:
        g.invoke({"query": FACTUAL}, context={"policy": "bad"})
    assert "faq" not in str(refused.value) and "holds:" not in str(refused.value)


# --- stage events in LangChain's event API ---------------------------------------------------


async def test_astream_events_yields_each_stage_as_a_custom_event() -> None:
    g = graph()
    custom = [
        e
        async for e in g.astream_events({"query": FACTUAL}, version="v2")
        if e["event"] == "on_custom_event"
    ]
    assert custom and all(e["name"] == "pipeline:step" for e in custom)
    out = await g.ainvoke({"query": FACTUAL})
    finals = [(s.step, s.status) for s in out["manifest"].stages]
    assert sorted((e["data"]["step"], e["data"]["status"]) for e in custom) == sorted(finals)


def test_nobody_listening_means_no_dispatch(monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[str] = []

    async def recording(name: str, data: Any, **kwargs: Any) -> None:
        sent.append(name)

    monkeypatch.setattr(per_run, "adispatch_custom_event", recording)
    g = graph()
    g.invoke({"query": FACTUAL})
    assert sent == []
    asyncio.run(_drain(g.astream_events({"query": FACTUAL}, version="v2")))
    assert sent and set(sent) == {"pipeline:step"}


async def _drain(events: Any) -> None:
    async for _ in events:
        pass


def test_run_context_is_the_graph_context_schema() -> None:
    schema = graph().get_context_jsonschema()
    assert schema is not None
    assert set(schema["properties"]) == set(RunContext.model_fields)


def test_a_context_tenant_is_never_silently_inherited_or_dropped_on_a_thread() -> None:
    """A turn without the thread's tenant is refused, not run under the thread's tenant (which
    the caller did not ask for) nor unscoped (which the thread's answers would then mix)."""
    from langgraph.checkpoint.memory import InMemorySaver

    from ragtiller.graph import checkpoint_serde

    ts = tiers()
    g = graph(tiers=ts, checkpointer=InMemorySaver(serde=checkpoint_serde()))
    config: Any = {"configurable": {"thread_id": "t1"}}
    g.invoke({"query": FACTUAL}, config, context={"tenant": "acme"})
    with pytest.raises(InputError, match="this thread was started with another tenant"):
        g.invoke({"query": FACTUAL}, config)
    g.invoke({"query": FACTUAL}, config, context={"tenant": "acme"})
    assert [call["filter"] for call in ts[0].calls] == [{"tenant": "acme"}, {"tenant": "acme"}]


def test_a_tenant_pinned_in_configurable_holds_beside_a_context_of_other_fields() -> None:
    ts = [
        StaticTier("dense", [hit("dense", f"c{i}", 0.9 - i / 100, tenant="acme") for i in range(9)])
    ]
    g = graph(tiers=ts)
    pinned: Any = {"configurable": {"ragtiller": {"tenant": "acme"}}}
    for context in ({"top_k": 3}, {}, {"rerank": "off"}):
        out = g.invoke({"query": FACTUAL}, pinned, context=context)
        assert out["manifest"].tenant == "acme"
    assert all(call["filter"] == {"tenant": "acme"} for call in ts[0].calls)
    assert len(out["documents"]) == 5  # the last context set no top_k
    three = g.invoke({"query": FACTUAL}, pinned, context={"top_k": 3})
    assert len(three["documents"]) == 3 and three["manifest"].overrides == {
        "tenant": "acme",
        "top_k": 3,
    }


@pytest.mark.parametrize("field,value", [("tenant", "globex"), ("top_k", 2)])
def test_a_field_the_context_and_configurable_set_differently_is_refused(
    field: str, value: Any
) -> None:
    pinned: Any = {"configurable": {"ragtiller": {"tenant": "acme", "top_k": 3}}}
    with pytest.raises(InputError, match=rf"set {field} differently") as refused:
        graph().invoke({"query": FACTUAL}, pinned, context={field: value})
    assert "acme" not in str(refused.value)


# --- a parent's own settings are never read as ragtiller's --------------------------------


@pytest.mark.parametrize(
    "parent", [{"policy": "gold-customer"}, {"tenant": "acme"}, {"top_k": "all"}, {"rerank": 7}]
)
def test_a_parents_generic_configurable_keys_are_not_read(parent: dict[str, Any]) -> None:
    g = graph()
    plain = g.invoke({"query": FACTUAL})
    out = g.invoke({"query": FACTUAL}, config={"configurable": parent})
    assert out["manifest"].overrides == {} and out["manifest"].tenant is None
    assert [d.id for d in out["documents"]] == [d.id for d in plain["documents"]]


def test_settings_under_the_ragtiller_key_are_checked_strictly() -> None:
    g = graph()
    with pytest.raises(InputError, match="topk: Extra inputs are not permitted"):
        g.invoke({"query": FACTUAL}, config={"configurable": {"ragtiller": {"topk": 1}}})
    with pytest.raises(InputError, match=r"configurable\['ragtiller'\] must be a dict"):
        g.invoke({"query": FACTUAL}, config={"configurable": {"ragtiller": "top_k=1"}})


def test_an_agent_tool_keeps_its_settings_under_a_parent_with_its_own_keys() -> None:
    from ragtiller.integrations.langchain import as_tool

    tool = as_tool(graph(), k=2)
    _, artifact = tool.func("which port?")  # type: ignore[misc]
    assert artifact["manifest"]["overrides"] == {"top_k": 2}
    message = tool.invoke(
        {"type": "tool_call", "id": "c1", "name": tool.name, "args": {"query": FACTUAL}},
        config={"configurable": {"policy": "gold-customer", "tenant": "acme", "top_k": "all"}},
    )
    assert message.artifact["manifest"]["overrides"] == {"top_k": 2}
    assert message.artifact["manifest"]["tenant"] is None


# --- a per-run policy applies every field it sets, or is refused ---------------------------


def index_graph_parts() -> dict[str, Any]:
    docs = [
        Document(
            page_content=f"# Guide {i}\n\n## Ports\n\nServer {i} listens on port {8000 + i}.\n\n"
            f"## Logs\n\nServer {i} writes its logs to /var/log/s{i}.",
            metadata={"source": f"g{i}.md"},
        )
        for i in range(6)
    ]
    return {"index": build_index(docs, embedder=HashingEmbedder(dim=64), progress=False)}


def turn_facts(out: dict[str, Any]) -> tuple[Any, ...]:
    manifest = out["manifest"]
    return (
        [(d.id, d.metadata["fused_score"]) for d in out["documents"]],
        {tier: [h.id for h in hits] for tier, hits in manifest.tiers.items()},
        manifest.fusion_method,
    )


@pytest.mark.parametrize("query", [FACTUAL, "how do I get started with the logs?"])
def test_a_per_run_policy_gives_the_turn_a_graph_built_with_it_would_give(
    query: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = load_policy("no-llm").model_dump(mode="json") | {"policy_id": "ranks"}
    data["fusion"]["method"] = "rrf"
    (tmp_path / "ranks.yaml").write_text(yaml.safe_dump(data), "utf-8")
    monkeypatch.setenv("RAGTILLER_POLICY_DIR", str(tmp_path))
    parts = index_graph_parts()
    built = build_graph(tmp_path / "ranks.yaml", **parts).invoke({"query": query})
    per_run = build_graph(**parts).invoke({"query": query}, context={"policy": "ranks"})
    assert per_run["manifest"].policy_id == "ranks"
    assert turn_facts(per_run) == turn_facts(built)
    default = build_graph(**parts).invoke({"query": query})
    assert turn_facts(default) != turn_facts(per_run)  # the fields differ, and they applied


def test_a_per_run_policy_that_changes_a_build_time_field_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = load_policy().model_dump(mode="json") | {"policy_id": "routed-by-llm"}
    data["router"]["llm_router"] = "on"
    data["reranker"]["provider"] = "identity"
    variant = tmp_path / "routed.yaml"
    variant.write_text(yaml.safe_dump(data), "utf-8")
    monkeypatch.setenv("RAGTILLER_POLICY_DIR", str(tmp_path))
    with pytest.raises(
        InputError, match=r"fixed when the graph was built \(router, reranker.provider\)"
    ):
        graph().invoke({"query": FACTUAL}, context={"policy": "routed"})


def test_a_per_run_policy_can_lower_the_daily_chat_limit() -> None:
    g = graph(chat_model=ScriptedChatModel())
    broad = "how do I get started with the server?"
    own = g.invoke({"query": broad})
    assert own["manifest"].step_back.status == "done"
    other = "how do I get started with the logs?"  # not cached by the first turn
    lowered = g.invoke({"query": other}, context={"policy": "no-llm", "step_back": "on"})
    assert lowered["manifest"].step_back.status == "skipped"
    assert lowered["manifest"].step_back.reason == "quota"


async def test_concurrent_turns_never_pass_a_run_policys_lower_daily_chat_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lower limit is checked in the ledger's atomic spend, not only in the gate's view,
    which ten turns read before any of them spends."""
    cheap = load_policy().model_dump(mode="json") | {"policy_id": "cheap"}
    cheap["quota"]["chat_gen_per_day"] = 3
    (tmp_path / "cheap.yaml").write_text(yaml.safe_dump(cheap), "utf-8")
    monkeypatch.setenv("RAGTILLER_POLICY_DIR", str(tmp_path))
    model = ScriptedChatModel()
    g = graph(chat_model=model)
    outs = await asyncio.gather(
        *(
            g.ainvoke(
                {"query": f"how do I get started with part {i}?"}, context={"policy": "cheap"}
            )
            for i in range(10)
        )
    )
    assert model.calls == 3
    reasons = sorted(str(o["manifest"].step_back.reason) for o in outs)
    assert reasons.count("quota") == 7
