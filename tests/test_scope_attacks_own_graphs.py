"""The scope attacks of issue 45 over ``langgraph dev`` against an operator's own graphs.

The Studio factory wires no chat model and serves only the embedded index (docs/deploy.md: "a
deployment that wants step-back writes its own factory ... and names it in ``langgraph.json``"),
so the findings that need a chat model, a pinned graph or another store are tried here, through
the real ``langgraph_sdk`` client, against the graphs of ``fixtures/scope_graphs.py``: each is
``build_graph`` over the corpora of ``test_scope_attacks``, compiled and named in a
``langgraph.json`` of its own. One server serves the module. An attack must end in an
``InputError`` naming no tenant or namespace, or stream none of the words it was not asked for,
and each asserts what its in-process twin in ``test_scope_attacks`` asserts.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import pytest
from langgraph_sdk import get_client, get_sync_client
from test_scope_attacks import (
    ORACLE_QUERY,
    three_acme_turns_leave_globex_its_own_budget,
)
from test_scope_attacks_server import Q, last_values, refused_or_clean, streamed
from test_studio import ROOT, DevServer

from ragtiller import RunManifest

pytestmark = pytest.mark.slow

GRAPHS = (
    "quota", "router", "pinned", "pinned_filter", "store", "flags", "flags_chroma",
    "oracle_kestrel", "oracle_heron",
)  # fmt: skip
"""The variables of fixtures/scope_graphs.py, each served as the graph of that name."""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tests = ROOT / "tests"  # the graph module imports the fakes and corpora kept here
    path = os.pathsep.join(p for p in (str(tests), os.environ.get("PYTHONPATH", "")) if p)
    dev = DevServer(
        tmp_path_factory.mktemp("own-graphs"),
        env={"PYTHONPATH": path},
        graphs={graph: f"tests/fixtures/scope_graphs.py:{graph}" for graph in GRAPHS},
    )
    try:
        url = dev.url(timeout_s=120)
        dev.wait_ready(url, timeout_s=120)
        yield url
    finally:
        dev.stop()


async def new_thread(client: Any) -> str:
    return str((await client.threads.create())["thread_id"])


# --- 3. a pinned graph's pin holds against a run's configurable and context -----------------


@pytest.mark.parametrize(
    "run",
    [
        {"config": {"configurable": {"ragtiller": {"tenant": "globex"}}}},
        {"context": {"tenant": "globex"}},
        {"context": {"tenant": "globex", "namespace": "default"}},
        {"input": {"query": Q, "tenant": "globex"}},
    ],
    ids=["configurable", "context", "context-namespace", "input"],
)
async def test_a_pinned_graph_refuses_a_runs_other_tenant(server: str, run: Any) -> None:
    async with get_client(url=server) as client:
        own = last_values(
            await streamed(client, await new_thread(client), "pinned", input={"query": Q})
        )
        assert "ZEBRAFISH" in json.dumps(own) and own["manifest"]["tenant"] == "acme"
        other = await streamed(
            client, await new_thread(client), "pinned", **({"input": {"query": Q}} | run)
        )
        refused_or_clean(other, "PLATYPUS")
        assert [e["error"] for e in other[1]] == ["InputError"], "a conflicting tenant is refused"


@pytest.mark.parametrize(
    "run",
    [
        {"config": {"configurable": {"ragtiller": {"tenant": "acme", "top_k": 3}}}},
        {"context": {"tenant": "acme", "top_k": 3}},
        {"context": {"filter": {"source": "acme.md"}}},
        {"context": {"filter": {"audience": "staff"}}},
    ],
    ids=["configurable", "context", "filter-adds-a-key", "filter-sets-the-pinned-key"],
)
async def test_a_pinned_filter_holds_when_a_run_adds_or_sets_a_field(server: str, run: Any) -> None:
    async with get_client(url=server) as client:
        graph = "pinned_filter"
        own = await streamed(client, await new_thread(client), graph, input={"query": Q})
        assert "ZEBRAFISH" in own[0] and "KOALA" not in own[0]
        added = await streamed(client, await new_thread(client), graph, input={"query": Q}, **run)
        refused_or_clean(added, "KOALA", "WOMBAT", "PLATYPUS")


# --- 4. a graph over a store of several tenants denies an unscoped turn ----------------------


async def test_an_unscoped_turn_over_a_store_of_several_tenants_is_refused(server: str) -> None:
    async with get_client(url=server) as client:
        seen, errors = await streamed(client, await new_thread(client), "store", input={"query": Q})
        assert [e["error"] for e in errors] == ["InputError"]
        assert "this graph serves several tenants" in errors[0]["message"]
        refused_or_clean((seen, errors), "ZEBRAFISH", "PLATYPUS", "WOMBAT")
        scoped = await streamed(
            client, await new_thread(client), "store", input={"query": Q, "tenant": "globex"}
        )
        assert "PLATYPUS" in scoped[0] and scoped[1] == []
        refused_or_clean(scoped, "ZEBRAFISH", "WOMBAT", "KOALA")


# --- 5. a daily LLM quota per tenant ---------------------------------------------------------


def test_per_tenant_daily_llm_limits_keep_acmes_turns_out_of_globexs_budget(server: str) -> None:
    """The in-process reproduction's own checks, each turn a run on a new thread of an assistant
    that pins its tenant in its context, as a deployment serving several tenants does."""
    with get_sync_client(url=server) as client:
        assistants = {
            tenant: client.assistants.create(graph_id="quota", context={"tenant": tenant})[
                "assistant_id"
            ]
            for tenant in ("acme", "globex")
        }

        def turn(tenant: str, query: str) -> RunManifest:
            thread = client.threads.create()["thread_id"]
            values: Any = client.runs.wait(thread, assistants[tenant], input={"query": query})
            assert "__error__" not in values, values
            return RunManifest.model_validate(values["manifest"])

        three_acme_turns_leave_globex_its_own_budget(turn)


# --- 6. the LLM router's cache is kept per tenant ---------------------------------------------


async def test_the_llm_routers_cache_tells_globex_nothing_of_acmes_question(server: str) -> None:
    async with get_client(url=server) as client:
        acme = await streamed(
            client, await new_thread(client), "router", input={"query": Q.upper(), "tenant": "acme"}
        )
        globex = await streamed(
            client, await new_thread(client), "router", input={"query": Q, "tenant": "globex"}
        )
    for values in (last_values(acme), last_values(globex)):
        assert values["manifest"]["router"] == "llm"
        assert values["manifest"]["router_detail"]["from_cache"] is False
    refused_or_clean(globex, Q.upper(), "ZEBRAFISH")


# --- 7. filters --------------------------------------------------------------------------------


async def sources(client: Any, graph: str, value: Any) -> list[str] | str:
    """The sources a filter on ``flag`` finds for acme, or the error that refused it."""
    context = {"tenant": "acme", "filter": {"flag": value}}
    seen, errors = await streamed(
        client, await new_thread(client), graph, input={"query": Q}, context=context
    )
    if errors:
        return str(errors[0]["error"])
    return sorted(d["metadata"]["source"] for d in last_values((seen, errors))["documents"])


async def test_a_filter_on_true_1_or_1_0_finds_the_same_documents_on_every_store(
    server: str,
) -> None:
    """JSON carries ``true``, ``1`` and ``1.0`` apart (``FLAGGED`` holds one of each): the
    embedded index and Chroma, served by one server, must agree on what each finds."""
    async with get_client(url=server) as client:
        for value in (True, 1, 1.0):
            on_index, on_chroma = [
                await sources(client, g, value) for g in ("flags", "flags_chroma")
            ]
            assert on_index == on_chroma, (value, on_index, on_chroma)
        assert await sources(client, "flags", True) == ["bool.md"]


async def test_a_filter_on_the_doc_id_a_document_shows_finds_it_on_an_in_memory_store(
    server: str,
) -> None:
    async with get_client(url=server) as client:
        shown = last_values(
            await streamed(
                client, await new_thread(client), "store", input={"query": Q, "tenant": "acme"}
            )
        )
        doc_id = shown["documents"][0]["metadata"]["doc_id"]
        context = {"tenant": "acme", "filter": {"doc_id": doc_id}}
        found = last_values(
            await streamed(
                client, await new_thread(client), "store", input={"query": Q}, context=context
            )
        )
    assert [d["metadata"]["doc_id"] for d in found["documents"]] == [doc_id]
    assert not any("acme" in label for label in found["manifest"]["degraded"])


# --- 8. oracles: what globex's turn tells of acme's documents ---------------------------------


async def test_globexs_documents_carry_no_raw_score_that_tells_of_acmes_words(
    server: str,
) -> None:
    """Two graphs over indexes that differ only in a word of acme's documents: globex's
    documents for its own question, text and metadata, must not tell them apart."""
    seen = []
    async with get_client(url=server) as client:
        for graph in ("oracle_kestrel", "oracle_heron"):
            values = last_values(
                await streamed(
                    client,
                    await new_thread(client),
                    graph,
                    input={"query": ORACLE_QUERY, "tenant": "globex"},
                )
            )
            seen.append([(d["page_content"], d["metadata"]) for d in values["documents"]])
    kestrel, heron = seen
    assert kestrel == heron
    assert kestrel and all("tier_scores" not in metadata for _, metadata in kestrel)
