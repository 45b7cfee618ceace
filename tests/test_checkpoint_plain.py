"""A thread's checkpoints hold only plain data and types LangGraph knows (issue 24).

Before, the run manifest (a pydantic model) went into every checkpoint, and LangGraph logged
"Deserializing unregistered type ragtiller.core.run_manifest.RunManifest ... will be blocked" on a plain
``InMemorySaver()``. LangGraph logs that warning once per process, so these tests listen to its
serde events, which fire on every read, as well as its log.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fixtures.thread_turns import TURNS, run
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from ragtiller.core.run_manifest import RunManifest
from ragtiller.nodes.state import ManifestValue

TESTS = Path(__file__).parent


def assert_restored(result: dict[str, Any]) -> None:
    assert result["events"] == [], result["events"]
    assert not [m for m in result["logged"] if "serializ" in m.lower()], result["logged"]
    assert len(result["turns"]) == len(TURNS)
    assert result["saved"] == result["turns"]  # get_state after each turn: the same values
    assert result["history"] >= len(TURNS)
    first, chat, one, greeting = result["turns"]
    assert first["documents"] and first["documents"][0][1]["source"] == "gather.md"
    assert chat["manifest"]["rerank_query"] == "json dumps indent"  # this turn's own question
    assert [kind for kind, _ in chat["messages"]][-2:] == ["human", "ai"]
    assert len(one["documents"]) == 1 and one["manifest"]["overrides"] == {"top_k": 1}
    assert greeting["documents"] == [] and greeting["manifest"]["query_type"] == "no_retrieval"
    assert len({turn["manifest"]["run_id"] for turn in result["turns"]}) == len(TURNS)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_default_checkpointer_restores_every_turn_without_a_warning(mode: str) -> None:
    assert_restored(run(mode, InMemorySaver()))


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("build", [{}, {"interrupt_before": ["fuse", "assemble"]}])
def test_a_serializer_that_knows_only_langgraphs_safe_types_restores_every_turn(
    mode: str, build: dict[str, Any]
) -> None:
    # allowed_msgpack_modules=None refuses every class outside LangGraph's own safe list,
    # with nothing added from the graph's schema: anything but plain data would be blocked
    saver = InMemorySaver(serde=JsonPlusSerializer(allowed_msgpack_modules=None))
    assert_restored(run(mode, saver, **build))


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_strict_msgpack_mode_restores_every_turn_without_a_warning(mode: str) -> None:
    env = {
        **os.environ,
        "LANGGRAPH_STRICT_MSGPACK": "true",
        "PYTHONPATH": os.pathsep.join([str(TESTS), str(TESTS.parent)]),
    }
    child = subprocess.run(
        [sys.executable, "-m", "fixtures.thread_turns", mode],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert child.returncode == 0, child.stderr
    result = json.loads(child.stdout)
    assert result["strict"] is True
    assert_restored(result)
    assert "serializ" not in child.stderr.lower(), child.stderr


def test_the_manifest_channel_checkpoints_the_json_dict_and_reads_back_the_model() -> None:
    manifest = RunManifest(
        run_id="r1",
        created_at="2024-01-01T00:00:00Z",
        policy_id="p",
        policy_version="1",
        query_type="factual_lookup",
        overrides={"top_k": 2},
    )
    channel = ManifestValue()
    channel.update([manifest])
    assert channel.get() is manifest
    saved = channel.checkpoint()
    assert type(saved) is dict and saved == manifest.model_dump(mode="json")
    restored = channel.from_checkpoint(saved)
    assert restored.get() == manifest and restored.checkpoint() == saved
