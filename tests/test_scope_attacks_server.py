"""The scope attacks of issue 45 that work over ``langgraph dev``, through the real
``langgraph_sdk`` client: a ``Command`` that sends a tier task the client wrote, and
``threads.update_state`` on a paused turn or on a thread.

One server serves the module, over a saved index in which tenant ``acme`` holds ZEBRAFISH, its
namespace ``private`` holds WOMBAT and tenant ``globex`` holds PLATYPUS. An attack must end in
an ``InputError`` event that names no tenant or namespace, or stream none of the marker words
it was not asked for (every part of the run is searched, in ``values``, ``updates`` and
``custom`` modes).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.documents import Document
from langgraph_sdk import get_client
from test_studio import DevServer

from ragtiller.ingest import build_index
from ragtiller.integrations.demo import demo_embedder

pytestmark = pytest.mark.slow

Q = "which port does the server listen on"
PIN = {"tenant": "acme", "namespace": "default"}
NAMES = ("acme", "globex", "private")
STREAM_MODES = ["values", "updates", "custom"]
GRAPH = "ragtiller"


def _doc(source: str, text: str, **metadata: Any) -> Document:
    return Document(page_content=text, metadata={"source": source, **metadata})


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    directory = tmp_path_factory.mktemp("scope-attacks")
    build_index(
        [
            _doc(
                "acme.md",
                "# Acme\n\nZEBRAFISH: the acme server listens on port 7000.",
                tenant="acme",
            ),
            _doc(
                "private.md",
                "# Private\n\nWOMBAT: the private server listens on port 7001.",
                tenant="acme",
                namespace="private",
            ),
            _doc(
                "globex.md",
                "# Globex\n\nPLATYPUS: the globex server listens on port 8000.",
                tenant="globex",
            ),
        ],
        embedder=demo_embedder("hashing"),
        progress=False,
    ).save(directory / "index")
    dev = DevServer(directory, env={"RAGTILLER_INDEX": str(directory / "index")})
    try:
        url = dev.url(timeout_s=120)
        dev.wait_ready(url, timeout_s=120)
        yield url
    finally:
        dev.stop()


async def streamed(
    client: Any, thread_id: str, assistant: str, **run: Any
) -> tuple[str, list[Any]]:
    """Every part one run streams, as one string, and its ``error`` events."""
    parts, errors = [], []
    async for part in client.runs.stream(thread_id, assistant, stream_mode=STREAM_MODES, **run):
        parts.append([part.event, part.data])
        if part.event == "error":
            errors.append(part.data)
    return json.dumps(parts, default=str), errors


def refused_or_clean(outcome: tuple[str, list[Any]], *forbidden: str) -> None:
    """Nothing streamed holds a word of ``forbidden``; a run that failed was refused with an
    ``InputError`` naming no tenant or namespace."""
    seen, errors = outcome
    assert [word for word in forbidden if word in seen] == [], "leaked"
    for error in errors:
        assert error["error"] == "InputError", error
        named = [name for name in NAMES if name in error["message"].lower()]
        assert named == [], f"the refusal names {named}: {error['message']}"


async def pinned_assistant(client: Any) -> str:
    """An assistant as a deployment pins a tenant: acme, in ``default`` only, in its context."""
    assistant = await client.assistants.create(graph_id=GRAPH, context=PIN)
    return str(assistant["assistant_id"])


def forged_task(filter: dict[str, Any] | None) -> dict[str, Any]:
    return {
        "tier": "lexical",
        "query": Q,
        "vector": None,
        "k": 50,
        "namespaces": None,
        "filter": filter,
        "deadline_s": 5.0,
        "turn_bound": False,
    }


# --- 1. command={"goto": {"node": "tier_search", "input": task}} -----------------------------


async def test_a_sent_tier_task_cannot_widen_a_pinned_assistants_turn(server: str) -> None:
    async with get_client(url=server) as client:
        assistant = await pinned_assistant(client)
        thread = (await client.threads.create())["thread_id"]
        first, errors = await streamed(client, thread, assistant, input={"query": Q})
        assert errors == [] and "ZEBRAFISH" in first and "WOMBAT" not in first
        goto = {"goto": {"node": "tier_search", "input": forged_task({"tenant": "acme"})}}
        refused_or_clean(
            await streamed(client, thread, assistant, command=goto), "WOMBAT", "PLATYPUS"
        )


async def test_a_sent_tier_task_without_a_filter_cannot_widen_an_input_scoped_turn(
    server: str,
) -> None:
    async with get_client(url=server) as client:
        thread = (await client.threads.create())["thread_id"]
        first, errors = await streamed(client, thread, GRAPH, input={"query": Q, "tenant": "acme"})
        assert errors == [] and "ZEBRAFISH" in first and "PLATYPUS" not in first
        goto = {"goto": {"node": "tier_search", "input": forged_task(None)}}
        refused_or_clean(await streamed(client, thread, GRAPH, command=goto), "PLATYPUS", "WOMBAT")


# --- 2. threads.update_state ---------------------------------------------------------------


async def test_tier_tasks_rewritten_while_paused_cannot_widen_a_pinned_assistants_turn(
    server: str,
) -> None:
    async with get_client(url=server) as client:
        assistant = await pinned_assistant(client)
        thread = (await client.threads.create())["thread_id"]
        _, errors = await streamed(
            client, thread, assistant, input={"query": Q}, interrupt_before=["tier_search"]
        )
        assert errors == []
        paused = await client.threads.get_state(thread)
        values: Any = paused["values"]
        assert paused["next"] and set(paused["next"]) == {"tier_search"}
        tasks = [dict(task, namespaces=None) for task in values["tier_tasks"]]
        await client.threads.update_state(thread, {"tier_tasks": tasks}, as_node="embed")
        refused_or_clean(
            await streamed(client, thread, assistant, input=None), "WOMBAT", "PLATYPUS"
        )


async def test_a_route_whose_tenant_is_erased_while_paused_cannot_search_every_tenant(
    server: str,
) -> None:
    async with get_client(url=server) as client:
        thread = (await client.threads.create())["thread_id"]
        _, errors = await streamed(
            client, thread, GRAPH, input={"query": Q, "tenant": "acme"}, interrupt_before=["embed"]
        )
        assert errors == []
        values: Any = (await client.threads.get_state(thread))["values"]
        route = values["route"]
        await client.threads.update_state(thread, {"route": {**route, "tenant": None}})
        refused_or_clean(await streamed(client, thread, GRAPH, input=None), "PLATYPUS")


async def test_a_scope_written_onto_acmes_thread_does_not_hand_globex_acmes_answer(
    server: str,
) -> None:
    async with get_client(url=server) as client:
        thread = (await client.threads.create())["thread_id"]
        first, errors = await streamed(client, thread, GRAPH, input={"query": Q, "tenant": "acme"})
        assert errors == [] and "ZEBRAFISH" in first
        forged = {"tenant": "globex", "namespaces": None, "filter": None}
        await client.threads.update_state(thread, {"scope": forged})
        globex = await streamed(
            client, thread, GRAPH, input={"query": Q}, context={"tenant": "globex"}
        )
        refused_or_clean(globex, "ZEBRAFISH", "WOMBAT")
