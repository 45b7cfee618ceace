"""LangGraph Studio: langgraph.json, .env.example, the graph factory, and `langgraph dev` serving it."""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from langchain_core.documents import Document
from langgraph.store.memory import InMemoryStore
from langgraph_cli.config import Config, validate_config_file
from langgraph_sdk import get_client
from langgraph_sdk.runtime import _ExecutionRuntime

from ragtiller import (
    ConfigurationError,
    InputError,
    PolicyError,
    RunManifest,
    load_policy,
)
from ragtiller.core.tiers import STAGES
from ragtiller.ingest import build_index
from ragtiller.integrations import studio, studio_graphs
from ragtiller.models import HashingEmbedder

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "langgraph.json"
ENV_EXAMPLE = ROOT / ".env.example"
QUESTION = "how do I run several coroutines concurrently?"
ENV_READ = [
    re.compile(r"\b\w*_ENV\s*=\s*\"([A-Z][A-Z0-9_]+)\""),
    re.compile(r"os\.environ(?:\.get\(|\[)\s*\"([A-Z][A-Z0-9_]+)\""),
    re.compile(r"os\.getenv\(\s*\"([A-Z][A-Z0-9_]+)\""),
]


# --- configuration files -------------------------------------------------------------------


def test_langgraph_json_is_valid_and_names_the_async_factory() -> None:
    raw = json.loads(CONFIG.read_text("utf-8"))
    # "$schema" is for editors (JSON Schema validation); langgraph-cli 0.4.40 only warns about it
    assert raw["$schema"] == "https://langgra.ph/schema.json"
    assert set(raw) - {"$schema"} <= set(Config.__annotations__)  # keys langgraph-cli knows
    config = validate_config_file(CONFIG)
    assert config["dependencies"] == ["."]
    assert set(config["graphs"]) == {"ragtiller", "ragtiller_no_llm", "ragtiller_indexer"}
    for spec in config["graphs"].values():
        path, _, variable = spec.partition(":")
        assert (ROOT / path).resolve() == Path(studio_graphs.__file__).resolve()
        factory = getattr(studio_graphs, variable)
        assert factory is getattr(studio, variable)  # the package module's: one shared state
        assert inspect.iscoroutinefunction(factory)
        (runtime,) = inspect.signature(factory).parameters.values()  # the server's runtime
        assert runtime.annotation == "ServerRuntime[Any]"
    assert config["env"] == ".env"
    assert ".env" in (ROOT / ".gitignore").read_text("utf-8").splitlines()


def variables_read_by_the_package() -> set[str]:
    names: set[str] = set()
    for file in (ROOT / "ragtiller").rglob("*.py"):
        text = file.read_text("utf-8")
        for pattern in ENV_READ:
            names.update(pattern.findall(text))
    return names


def test_env_example_lists_exactly_the_variables_the_code_reads() -> None:
    listed = {
        line.split("=", 1)[0]
        for line in ENV_EXAMPLE.read_text("utf-8").splitlines()
        if line and not line.startswith("#")
    }
    read = variables_read_by_the_package()
    assert {"REDIS_URL", "COHERE_API_KEY", "RAGTILLER_INDEX"} <= read
    assert listed == read
    assert all(
        line.endswith("=")
        for line in ENV_EXAMPLE.read_text("utf-8").splitlines()
        if "=" in line and not line.startswith("#")
    )


# --- the factory ---------------------------------------------------------------------------


def test_default_studio_graph_needs_no_credentials_and_answers() -> None:
    graph = studio.build_studio_graph({})
    out = graph.invoke({"query": "json.dumps"})
    sources = {d.metadata["source"] for d in out["documents"]}
    assert "docstring:json.dumps" in sources
    assert out["context"].startswith("[1] ")
    assert out["manifest"].query_type == "exact_lexical_lookup"


def test_studio_graph_opens_a_saved_index(tmp_path: Path) -> None:
    docs = [
        Document(
            "# Deploying\n\nRun `tiller deploy --region eu` to ship the service.",
            metadata={"source": "deploy.md"},
        ),
        Document("# Billing\n\nInvoices are sent monthly.", metadata={"source": "billing.md"}),
    ]
    build_index(docs, embedder=HashingEmbedder(), progress=False).save(tmp_path / "idx")
    graph = studio.build_studio_graph({"RAGTILLER_INDEX": str(tmp_path / "idx")})
    out = graph.invoke({"query": "how do I deploy the service to a region?"})
    assert out["documents"][0].metadata["source"] == "deploy.md"


def test_studio_graph_uses_the_policy_named_in_the_environment(tmp_path: Path) -> None:
    variant = tmp_path / "variant.yaml"
    policy = load_policy().model_dump(mode="json") | {"policy_id": "studio-variant"}
    variant.write_text(yaml.safe_dump(policy), "utf-8")
    graph = studio.build_studio_graph({"RAGTILLER_POLICY": str(variant)})
    assert graph.invoke({"query": "json.dumps"})["manifest"].policy_id == "studio-variant"


def test_a_bad_policy_fails_before_the_index_is_built(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_index(env: object) -> None:
        raise AssertionError("the index was built before the policy was checked")

    monkeypatch.setattr(studio, "studio_index", no_index)
    with pytest.raises(PolicyError, match="no-such-policy"):
        studio.build_studio_graph({"RAGTILLER_POLICY": "no-such-policy"})


def test_an_unknown_embedder_names_the_variable() -> None:
    with pytest.raises(ConfigurationError, match=r"RAGTILLER_EMBEDDER: unknown embedder 'bert'"):
        studio.build_studio_graph({"RAGTILLER_EMBEDDER": "bert"})


async def test_make_graph_builds_once_off_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    built_on: list[threading.Thread] = []
    opened: list[threading.Thread] = []
    index = object()

    def fake_open(env: object) -> object:
        opened.append(threading.current_thread())
        return index

    def fake_build(
        env: object, *, policy: str | None, index: object, **stores: object
    ) -> tuple[object, object]:
        built_on.append(threading.current_thread())
        return policy, index

    monkeypatch.delenv("RAGTILLER_POLICY", raising=False)
    monkeypatch.setattr(studio, "_graphs", {})
    monkeypatch.setattr(studio, "_index", None)
    monkeypatch.setattr(studio, "_open", fake_open)
    monkeypatch.setattr(studio, "build_studio_graph", fake_build)
    run = server_runtime({"top_k": 2})
    first, second, lean = await asyncio.gather(
        studio.make_graph(run), studio.make_graph(run), studio.make_no_llm_graph(run)
    )
    assert first is second == (None, index)
    assert lean == ("no-llm", index)  # the second graph shares the index
    assert len(built_on) == 2 and len(opened) == 1
    assert threading.current_thread() not in built_on + opened


def server_runtime(context: Any) -> Any:
    """What the server hands a factory for a run with this context."""
    return _ExecutionRuntime(
        access_context="threads.create_run", user=None, store=InMemoryStore(), context=context
    )


@pytest.mark.parametrize(
    ("context", "match"),
    [({"topk": 1}, "topk: Extra inputs are not permitted"), ({"top_k": 0}, "greater than 0")],
)
async def test_the_factory_refuses_a_run_context_the_server_would_filter(
    context: dict[str, Any], match: str
) -> None:
    with pytest.raises(InputError, match=match):
        await studio.make_graph(server_runtime(context))
    with pytest.raises(InputError, match=match):
        await studio.make_no_llm_graph(server_runtime(context))


def test_the_no_llm_graph_makes_no_model_call() -> None:
    graph = studio.build_studio_graph({}, policy=studio.NO_LLM_POLICY)
    out = graph.invoke({"query": "how do I get started with asyncio?"})
    assert out["manifest"].policy_id == "no-llm"
    assert out["manifest"].step_back.reason == "disabled"
    assert out["manifest"].llm_calls == 0


def test_a_bad_index_directory_is_a_configuration_error_naming_the_variable(
    tmp_path: Path,
) -> None:
    with pytest.raises(ConfigurationError, match=r"RAGTILLER_INDEX='.*missing'"):
        studio.build_studio_graph({"RAGTILLER_INDEX": str(tmp_path / "missing")})


def test_minilm_is_chosen_by_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[str] = []

    def recording_embedder(kind: str) -> HashingEmbedder:
        asked.append(kind)
        return HashingEmbedder()

    monkeypatch.setattr(studio, "demo_embedder", recording_embedder)
    studio.studio_index({"RAGTILLER_EMBEDDER": " minilm "})
    studio.studio_index({})
    assert asked == ["minilm", "hashing"]


# --- `langgraph dev` -----------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def hermetic_env() -> dict[str, str]:
    """This process's environment without any ragtiller or backend settings, plus CLI quiet flags."""
    drop = variables_read_by_the_package()
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update(LANGGRAPH_CLI_NO_ANALYTICS="1", LANGGRAPH_NO_VERSION_CHECK="true")
    return env


def server_config(directory: Path, graphs: dict[str, str] | None = None) -> Path:
    """The repository's langgraph.json with paths made absolute and no ``.env`` file, so the
    server can run from ``directory`` (its state goes there) whatever a developer's .env holds.
    ``graphs`` (``{graph_id: "path.py:variable"}``, paths from the repository) replace its graphs,
    as an operator's own langgraph.json names its own."""
    config = json.loads(CONFIG.read_text("utf-8"))
    config["dependencies"] = [str((ROOT / dep).resolve()) for dep in config["dependencies"]]
    config["graphs"] = {
        graph_id: str((ROOT / spec.partition(":")[0]).resolve()) + ":" + spec.partition(":")[2]
        for graph_id, spec in (graphs or config["graphs"]).items()
    }
    del config["env"]
    path = directory / "langgraph.json"
    path.write_text(json.dumps(config), "utf-8")
    return path


class DevServer:
    """`langgraph dev` in its own process group, with its output collected line by line."""

    def __init__(
        self,
        directory: Path,
        env: dict[str, str] | None = None,
        graphs: dict[str, str] | None = None,
    ) -> None:
        command = [
            sys.executable, "-m", "langgraph_cli", "dev",
            "--config", str(server_config(directory, graphs)),
            "--no-reload", "--no-browser", "--host", "127.0.0.1", "--port", str(free_port()),
        ]  # fmt: skip
        self.process = subprocess.Popen(
            command,
            cwd=directory,
            env={**hermetic_env(), **(env or {})},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.log: list[str] = []
        self._pump_thread = threading.Thread(target=self._pump, daemon=True)
        self._pump_thread.start()

    def _pump(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)

    def _drain(self, timeout_s: float) -> str | None:
        try:
            line = self.lines.get(timeout=timeout_s)
        except queue.Empty:
            return None
        self.log.append(line)
        return line

    def url(self, timeout_s: float) -> str:
        """The API address the server reports (it moves to another port if ours was taken)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            line = self._drain(0.5)
            if line is not None and (found := re.search(r"API: \S*?(http://[\d.]+:\d+)", line)):
                return found[1]
            if line is None and self.process.poll() is not None:
                break
        raise AssertionError("langgraph dev reported no API address:\n" + "".join(self.log))

    def wait_ready(self, url: str, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            assert self.process.poll() is None, "langgraph dev exited:\n" + "".join(self.log)
            try:
                if httpx.get(f"{url}/ok", timeout=2.0).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            while self._drain(0.2) is not None:
                pass
        raise AssertionError("langgraph dev never became ready:\n" + "".join(self.log))

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)
        self._pump_thread.join(timeout=10)
        while self._drain(0) is not None:
            pass
        if self.process.stdout is not None:
            self.process.stdout.close()


@pytest.fixture
def dev_server(tmp_path: Path) -> Iterator[tuple[str, DevServer]]:
    server = DevServer(tmp_path)
    try:
        url = server.url(timeout_s=120)
        server.wait_ready(url, timeout_s=120)
        yield url, server
    finally:
        server.stop()


async def one_turn(url: str, query: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One run on a new thread, streamed as ``custom`` and ``values``: final values, events."""
    events: list[dict[str, Any]] = []
    values: dict[str, Any] = {}
    async with get_client(url=url) as client:
        thread = await client.threads.create()
        async for part in client.runs.stream(
            thread["thread_id"],
            "ragtiller",
            input={"query": query},
            stream_mode=["custom", "values"],
        ):
            assert part.event != "error", part.data
            if part.event == "custom":
                events.append(part.data)
            elif part.event == "values":
                values = part.data
    return values, events


@pytest.mark.slow
async def test_langgraph_dev_serves_the_graph_with_stage_events(
    dev_server: tuple[str, DevServer],
) -> None:
    url, server = dev_server
    values, events = await one_turn(url, QUESTION)

    assert set(values) == {"documents", "messages", "context", "manifest", "stages"}
    assert values["context"].startswith("[1] ")
    assert values["documents"] and values["documents"][0]["metadata"]["citation"] == 1
    manifest = RunManifest.model_validate(values["manifest"])
    assert manifest.rerank_query == QUESTION
    assert manifest.step_back.reason == "no-llm"  # Studio opens without an LLM

    assert all(e["type"] == "pipeline:step" for e in events)
    final = {e["step"] for e in events if e["status"] != "active"}
    assert final == set(STAGES)

    again, _ = await one_turn(url, "json.dumps")  # the factory's graph is reused, not rebuilt
    assert RunManifest.model_validate(again["manifest"]).query_type == "exact_lexical_lookup"
    server.stop()
    log = "".join(server.log)
    assert "BlockingError" not in log
    assert log.count("Slow graph load") <= 1  # only the first run builds the demo index


async def errors_of(url: str, **run: Any) -> list[dict[str, Any]]:
    """The ``error`` events of one run on a new thread."""
    found = []
    async with get_client(url=url) as client:
        thread = await client.threads.create()
        async for part in client.runs.stream(thread["thread_id"], "ragtiller", **run):
            if part.event == "error":
                found.append(part.data)
    return found


@pytest.mark.slow
async def test_langgraph_dev_shows_the_run_context_compact_updates_and_our_errors(
    dev_server: tuple[str, DevServer],
) -> None:
    url, _ = dev_server
    async with get_client(url=url) as client:
        assistants = {a["graph_id"]: a for a in await client.assistants.search()}
        assert set(assistants) == {"ragtiller", "ragtiller_no_llm", "ragtiller_indexer"}
        schemas = await client.assistants.get_schemas(assistants["ragtiller"]["assistant_id"])
        fields = set(schemas["context_schema"]["properties"])
        assert fields == {
            "policy", "top_k", "max_chunks", "namespace", "tenant", "filter", "step_back",
            "rerank",
        }  # fmt: skip

        thread = await client.threads.create()
        updates: dict[str, list[Any]] = {}
        values: dict[str, Any] = {}
        async for part in client.runs.stream(
            thread["thread_id"],
            "ragtiller",
            input={"query": QUESTION},
            context={"top_k": 2},
            stream_mode=["updates", "values"],
        ):
            assert part.event != "error", part.data
            if part.event == "updates":
                for node, update in part.data.items():
                    updates.setdefault(node, []).append(update)
            elif part.event == "values" and "documents" in part.data:
                values = part.data
        assert len(values["documents"]) == 2
        assert values["manifest"]["overrides"] == {"top_k": 2}
        for node in ("gate", "embed", "tier_search", "fuse", "assemble"):
            for update in updates[node]:
                assert update is not None and update["stages"], node
                assert {r["step"] for r in update["stages"]} >= {node} or node == "gate"
        for node in ("gate", "embed", "tier_search", "fuse"):
            assert max(len(json.dumps(u)) for u in updates[node]) < 4000, node

        state = await client.threads.get_state(thread["thread_id"])
        # the server's checkpointer saved the whole turn, hit lists included
        assert state["values"]["tier_hits"] and state["values"]["candidates"]

    bad_context = await errors_of(url, input={"query": QUESTION}, context={"top_k": 0})
    assert [e["error"] for e in bad_context] == ["InputError"]
    assert "top_k: Input should be greater than 0" in bad_context[0]["message"]
    bad_input = await errors_of(url, input={"question": QUESTION})
    assert [e["error"] for e in bad_input] == ["InputError"]
    assert "unknown input key(s) 'question'" in bad_input[0]["message"]


@pytest.mark.slow
async def test_langgraph_dev_shows_a_bad_index_as_ragtiller_wrote_it(tmp_path: Path) -> None:
    server = DevServer(tmp_path, env={"RAGTILLER_INDEX": str(tmp_path / "missing")})
    try:
        url = server.url(timeout_s=120)
        server.wait_ready(url, timeout_s=120)
        expected = f"RAGTILLER_INDEX='{tmp_path / 'missing'}': no index at"
        async with get_client(url=url) as client:
            assistant = next(
                a for a in await client.assistants.search() if a["graph_id"] == "ragtiller"
            )
            async with httpx.AsyncClient(timeout=60) as http:
                shape = await http.get(f"{url}/assistants/{assistant['assistant_id']}/graph")
            assert shape.status_code == 400
            assert expected in shape.json()["detail"]
        errors = await errors_of(url, input={"query": QUESTION})
        assert [e["error"] for e in errors] == ["ConfigurationError"]
        assert expected in errors[0]["message"]
    finally:
        server.stop()


async def run_values(client: Any, thread_id: str, input: Any, **run: Any) -> dict[str, Any]:
    """The last ``values`` of one run on ``thread_id`` (it must raise no error)."""
    values: dict[str, Any] = {}
    async for part in client.runs.stream(
        thread_id, "ragtiller", input=input, stream_mode=["values"], **run
    ):
        assert part.event != "error", part.data
        if part.event == "values":
            values = part.data
    return values


@pytest.mark.slow
async def test_langgraph_dev_threads_breakpoints_and_context_behave_as_invoke(
    dev_server: tuple[str, DevServer],
) -> None:
    url, _ = dev_server
    async with get_client(url=url) as client:
        plain_thread = await client.threads.create()
        plain = await run_values(client, plain_thread["thread_id"], {"query": QUESTION})
        expected = [d["id"] for d in plain["documents"]]
        assert expected
        for where in ("interrupt_before", "interrupt_after"):
            for node in STAGES:  # every node boundary, as Studio's breakpoints set them
                thread = await client.threads.create()
                payload = {"query": QUESTION}
                first = await run_values(client, thread["thread_id"], payload, **{where: [node]})
                paused = await client.threads.get_state(thread["thread_id"])
                # no pause when the node did not run on this route (step_back: no LLM), or
                # after the last node: the run has ended, and is compared as it is
                resumed = first
                if paused["next"]:
                    resumed = await run_values(client, thread["thread_id"], None)
                assert [d["id"] for d in resumed["documents"]] == expected, (where, node)
                assert resumed["manifest"]["degraded"] == plain["manifest"]["degraded"]

        chat = await client.threads.create()
        await run_values(client, chat["thread_id"], {"query": "pathlib glob"})
        second = await run_values(
            client,
            chat["thread_id"],
            {"messages": [{"type": "human", "content": "json dumps indent"}]},
        )
        assert second["manifest"]["rerank_query"] == "json dumps indent"
        assert second["messages"][-1]["type"] == "ai"
        assert second["messages"][-1]["content"] == second["context"]

    for context in ({"topk": 1}, {"k": 1}):
        errors = await errors_of(url, input={"query": QUESTION}, context=context)
        assert [e["error"] for e in errors] == ["InputError"], context
        assert "Extra inputs are not permitted" in errors[0]["message"]
