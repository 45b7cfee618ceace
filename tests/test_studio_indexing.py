"""The indexing graph (issue 24): ingest a folder or documents into Studio's index, confined to
the root the operator configures, in process and through `langgraph dev`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph_sdk import get_client
from test_studio import DevServer, server_runtime

from ragtiller import ConfigurationError, InputError
from ragtiller.index import open_index
from ragtiller.integrations import studio

PORTS = "# Ports\n\nThe zebrafoil server listens on port 7000 by default.\n"
BILLING = "# Billing\n\nOtterquill invoices are sent on the first day of each month.\n"
ASK_PORTS = "which port does the zebrafoil server listen on"
KESTREL = "# Queue\n\nThe kestrel queue retries a failed job three times.\n"
ASK_KESTREL = "how often does the kestrel queue retry a failed job"


@pytest.fixture
def place(tmp_path: Path) -> dict[str, str]:
    """An ingest root with a handbook, a secret outside it, links out, and hidden files."""
    root = tmp_path / "root"
    (root / "handbook" / "deep").mkdir(parents=True)
    (root / "handbook" / "ports.md").write_text(PORTS, "utf-8")
    (root / "handbook" / "deep" / "billing.md").write_text(BILLING, "utf-8")
    (root / ".env").write_text("API_KEY=sk-live-rootsecret\n", "utf-8")
    (root / ".hidden").mkdir()
    (root / ".hidden" / "notes.md").write_text("hiddennote text\n", "utf-8")
    (root / "settings.yaml").write_text("password: yamlsecret\n", "utf-8")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("# Secret\n\nvaultword is the outside secret.\n", "utf-8")
    (root / "handbook" / "leak.md").symlink_to(outside / "secret.md")
    (root / "out").symlink_to(outside)
    return {"RAGTILLER_INDEX": str(tmp_path / "index"), "RAGTILLER_INGEST_ROOT": str(root)}


def indexed(env: dict[str, str]) -> list[Document]:
    """Every chunk the saved index holds, read back from disk."""
    return open_index(env["RAGTILLER_INDEX"]).documents()


def indexed_text(env: dict[str, str]) -> str:
    return "\n".join(doc.page_content for doc in indexed(env))


def versions(env: dict[str, str]) -> list[str]:
    directory = Path(env["RAGTILLER_INDEX"])
    return sorted(p.name for p in directory.rglob("v0*")) if directory.exists() else []


# --- in process ----------------------------------------------------------------------------

RUN = server_runtime({})


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_folder_is_ingested_with_ids_relative_to_the_root(
    place: dict[str, str], mode: str
) -> None:
    graph = studio.studio_indexing_graph(place)
    payload = {"path": "handbook"}
    out = graph.invoke(payload) if mode == "sync" else await graph.ainvoke(payload)
    report = out["report"]
    assert report["documents"]["added"] == 2 and report["index"]["documents"] == 2
    assert report["cleanup"] == "incremental" and report["version"]
    assert report["skipped"] == [
        {"path": "handbook/leak.md", "reason": "symlink out of the tree (not followed)"}
    ]
    assert "vaultword" not in indexed_text(place)
    assert {d.metadata["doc_id"] for d in indexed(place)} == {
        "handbook/ports.md",
        "handbook/deep/billing.md",
    }
    # the same file, named by another folder, keeps its id: nothing is added twice
    again = graph.invoke({"path": "handbook/deep/billing.md"})["report"]
    assert again["documents"] == {"added": 0, "updated": 0, "unchanged": 1, "deleted": 0}
    whole = graph.invoke({"path": "."})["report"]
    assert whole["documents"]["unchanged"] == 2 and whole["index"]["documents"] == 2
    found = studio.build_studio_graph(place).invoke({"query": ASK_PORTS})
    assert found["documents"][0].metadata["source"] == "handbook/ports.md"


async def test_documents_in_every_shape_are_added_then_updated_in_place(
    place: dict[str, str],
) -> None:
    graph = studio.studio_indexing_graph(place)
    docs: list[Any] = [
        Document(PORTS, metadata={"source": "ports.md"}),
        {"page_content": BILLING, "metadata": {"source": "billing.md", "tenant": "acme"}},
        "The kestrel queue retries three times.",
    ]
    first = (await graph.ainvoke({"docs": docs, "namespace": "guides"}))["report"]
    assert first["documents"]["added"] == 3
    changed = {"page_content": BILLING + "Late fees apply.", "metadata": {"source": "billing.md"}}
    second = graph.invoke({"docs": [changed], "namespace": "guides"})["report"]
    assert second["documents"] == {"added": 0, "updated": 1, "unchanged": 0, "deleted": 0}
    assert second["index"]["documents"] == 3  # incremental: the others stay
    index = open_index(place["RAGTILLER_INDEX"])
    assert set(index.manifest.namespaces) == {"guides"}
    assert "Late fees apply." in indexed_text(place)


def test_full_cleanup_leaves_exactly_what_the_run_sent(place: dict[str, str]) -> None:
    graph = studio.studio_indexing_graph(place)
    graph.invoke({"path": "handbook"})
    out = graph.invoke({"docs": ["The kestrel queue retries three times."], "cleanup": "full"})
    assert out["report"]["documents"]["deleted"] == 2 and out["report"]["index"]["documents"] == 1


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("../outside", "stay inside it"),
        ("/etc", "stay inside it"),
        ("handbook/../../outside/secret.md", "stay inside it"),
        (".env", "hidden"),
        (".hidden/notes.md", "hidden"),
        ("out", "leads out of RAGTILLER_INGEST_ROOT"),
        ("out/secret.md", "leads out of RAGTILLER_INGEST_ROOT"),
        ("handbook/leak.md", "leads out of RAGTILLER_INGEST_ROOT"),
        ("settings.yaml", "only .md, .markdown, .rst, .txt, .jsonl files"),
        ("handbook/missing.md", "no such file or folder"),
        ("handbook/\x00.md", "holds a NUL character"),
        ("h" * 1025, "1025 characters long; at most 1024"),
        ("h" * 300, "cannot be opened: File name too long"),
    ],
)
def test_a_path_outside_the_root_or_not_a_document_is_refused(
    place: dict[str, str], path: str, message: str
) -> None:
    graph = studio.studio_indexing_graph(place)
    with pytest.raises(InputError, match=message):
        graph.invoke({"path": path})
    assert versions(place) == []  # nothing was written


def test_the_absolute_root_itself_is_not_a_way_in(place: dict[str, str]) -> None:
    with pytest.raises(InputError, match="stay inside it"):
        studio.studio_indexing_graph(place).invoke({"path": place["RAGTILLER_INGEST_ROOT"]})


def test_without_a_root_folders_are_refused_and_documents_still_work(
    place: dict[str, str],
) -> None:
    env = {"RAGTILLER_INDEX": place["RAGTILLER_INDEX"]}
    graph = studio.studio_indexing_graph(env)
    with pytest.raises(ConfigurationError, match="RAGTILLER_INGEST_ROOT is not set"):
        graph.invoke({"path": "."})
    assert graph.invoke({"docs": [PORTS]})["report"]["documents"]["added"] == 1


async def test_the_factory_refuses_a_run_context(place: dict[str, str]) -> None:
    with pytest.raises(InputError, match="takes no run context, but got 'top_k'"):
        await studio.make_indexing_graph(server_runtime({"top_k": 2}))


def test_without_an_index_directory_there_is_no_indexing_graph() -> None:
    with pytest.raises(ConfigurationError, match="RAGTILLER_INDEX is not set"):
        studio.studio_indexing_graph({"RAGTILLER_INGEST_ROOT": "/"})


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({}, "nothing to ingest"),
        ({"paths": "handbook"}, "unknown input key"),
        ({"docs": ["x"], "cleanup": "wipe"}, "cleanup must be"),
        ({"docs": [3]}, r"docs\[0\]"),
        ({"docs": [{"text": "x"}]}, r"docs\[0\].*'text'"),
        ({"docs": "one string"}, "docs must be a list"),
        ({"path": 7}, "path must be a string"),
        ({"docs": ["x"], "namespace": " "}, "namespace must be"),
    ],
)
def test_bad_input_is_an_input_error(
    place: dict[str, str], payload: dict[str, Any], message: str
) -> None:
    with pytest.raises(InputError, match=message):
        studio.studio_indexing_graph(place).invoke(payload)


def test_a_thread_holds_plain_data_and_no_run_inherits_the_last_runs_input(
    place: dict[str, str],
) -> None:
    graph = studio.studio_indexing_graph(place)
    saver = InMemorySaver(serde=JsonPlusSerializer(allowed_msgpack_modules=None))
    threaded = graph.copy(update={"checkpointer": saver})
    config: Any = {"configurable": {"thread_id": "t"}}
    threaded.invoke({"path": "handbook"}, config)
    second = threaded.invoke({"docs": [BILLING.replace("first", "last")]}, config)["report"]
    assert second["documents"] == {"added": 1, "updated": 0, "unchanged": 0, "deleted": 0}
    assert set(threaded.get_state(config).values) == {"report"}
    with pytest.raises(InputError):
        threaded.invoke({"path": "../outside"}, config)
    third = threaded.invoke({"docs": ["The kestrel queue retries."]}, config)["report"]
    assert third["documents"]["added"] == 1  # the failed run's path is not run again


async def test_studio_graphs_search_what_was_ingested_and_keep_their_stores(
    place: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in place.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("RAGTILLER_POLICY", raising=False)
    monkeypatch.setattr(studio, "_graphs", {})
    monkeypatch.setattr(studio, "_index", None)
    monkeypatch.setattr(studio, "_stores", {})
    indexer = await studio.make_indexing_graph(RUN)
    await indexer.ainvoke({"docs": [BILLING]})
    before = await studio.make_graph(RUN)
    stores = studio._stores[""]
    out = await (await studio.make_indexing_graph(RUN)).ainvoke({"path": "handbook/ports.md"})
    assert out["report"]["documents"]["added"] == 1
    after = await studio.make_graph(RUN)
    assert after is not before and studio._stores[""] is stores
    found = await after.ainvoke({"query": ASK_PORTS})
    assert found["documents"][0].metadata["source"] == "handbook/ports.md"
    unchanged = await (await studio.make_indexing_graph(RUN)).ainvoke({"path": "handbook/ports.md"})
    assert unchanged["report"]["version"] is None
    assert await studio.make_graph(RUN) is after  # nothing changed: nothing rebuilt


# --- `langgraph dev` -----------------------------------------------------------------------


async def run_indexer(client: Any, thread_id: str, payload: dict[str, Any]) -> dict[str, Any]:
    """One indexer run on ``thread_id``: its final values, or its error event."""
    values: dict[str, Any] = {}
    async for part in client.runs.stream(
        thread_id, "ragtiller_indexer", input=payload, stream_mode="values"
    ):
        if part.event == "error":
            return {"error": part.data}
        if part.event == "values":
            values = part.data
    return values


async def sources_found(client: Any, query: str) -> list[str]:
    """The sources a ``ragtiller`` run on a new thread returns for ``query``."""
    thread = await client.threads.create()
    values: dict[str, Any] = {}
    async for part in client.runs.stream(
        thread["thread_id"], "ragtiller", input={"query": query}, stream_mode="values"
    ):
        assert part.event != "error", part.data
        values = part.data
    return [d["metadata"]["source"] for d in values["documents"]]


@pytest.mark.slow
@pytest.mark.parametrize("strict", ["false", "true"])
async def test_langgraph_dev_serves_the_indexer_and_the_retrieval_graph_finds_its_documents(
    place: dict[str, str], tmp_path: Path, strict: str
) -> None:
    # by default the server warns about a type LangGraph does not know; strict, it refuses it
    server = DevServer(tmp_path, env={**place, "LANGGRAPH_STRICT_MSGPACK": strict})
    try:
        url = server.url(timeout_s=120)
        server.wait_ready(url, timeout_s=120)
        async with get_client(url=url) as client:
            graphs = {a["graph_id"] for a in await client.assistants.search()}
            assert "ragtiller_indexer" in graphs
            thread = (await client.threads.create())["thread_id"]
            first = await run_indexer(client, thread, {"path": "handbook"})
            assert first["report"]["documents"]["added"] == 2, first
            assert first["report"]["skipped"][0]["path"] == "handbook/leak.md"
            assert (await sources_found(client, ASK_PORTS))[0] == "handbook/ports.md"
            kestrel = {"page_content": KESTREL, "metadata": {"source": "queue.md"}}
            second = await run_indexer(client, thread, {"docs": [kestrel]})
            assert second["report"]["documents"] == {
                "added": 1, "updated": 0, "unchanged": 0, "deleted": 0
            }  # fmt: skip
            # the retrieval graphs, already built, now search the new version
            assert (await sources_found(client, ASK_KESTREL))[0] == "queue.md"
            refused = await run_indexer(client, thread, {"path": "../outside"})
            assert refused["error"]["error"] == "InputError"
            assert "stay inside it" in refused["error"]["message"]
            typo = await run_indexer(client, thread, {"paths": "handbook"})
            assert typo["error"]["error"] == "InputError"
            history = await client.threads.get_history(thread)  # read back: no warning (below)
            assert [
                h["values"]["report"]["documents"]["added"] for h in history if h["next"] == []
            ][:2] == [1, 2]

            # two turns on one thread, read back: the checkpoints restore without a warning
            asked = (await client.threads.create())["thread_id"]
            for query in (ASK_PORTS, ASK_KESTREL):
                await client.runs.wait(asked, "ragtiller", input={"query": query})
            saved = (await client.threads.get_state(asked))["values"]
            assert saved["manifest"]["rerank_query"] == ASK_KESTREL
            assert len(await client.threads.get_history(asked)) >= 2
    finally:
        server.stop()
    log = "".join(server.log)
    assert "vaultword" not in indexed_text(place)
    assert "BlockingError" not in log
    assert "Deserializing unregistered type" not in log and "Blocked deserialization" not in log
    assert os.path.isdir(place["RAGTILLER_INDEX"])
