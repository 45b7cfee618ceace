"""The ``ragtiller`` command, run as a user runs it: a subprocess, its output and exit code."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ragtiller.types import STAGES

DOCS = {
    "guide.md": "# Guide\n\n## Install\n\nRun pip install ragtiller to install it.\n\n## Errors\n\n"
    "QuotaExhaustedError is raised when the daily chat budget is spent.\n",
    "notes.rst": "Notes\n=====\n\nThe ledger window is the calendar day in UTC by default.\n",
}


def ragtiller(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONWARNINGS": "ignore::DeprecationWarning"}
    return subprocess.run(
        [sys.executable, "-m", "ragtiller.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        env=env,
    )


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    corpus = tmp_path_factory.mktemp("corpus")
    for name, text in DOCS.items():
        (corpus / name).write_text(text, "utf-8")
    (corpus / "blob.txt").write_bytes(bytes(range(256)) * 4)  # binary under a text name
    index = tmp_path_factory.mktemp("idx") / "index"
    done = ragtiller(
        "ingest", str(corpus), "--index", str(index), "--embedder", "hashing", "--quiet"
    )
    assert done.returncode == 0, done.stderr
    assert "indexed" in done.stdout
    assert "blob.txt" in done.stderr  # the binary file is skipped, and named
    return index


def test_ask_prints_citations_and_stage_table(index_dir: Path) -> None:
    done = ragtiller(
        "ask",
        "what is raised when the QuotaExhaustedError budget is spent",
        "--index",
        str(index_dir),
    )
    assert done.returncode == 0, done.stderr
    assert "[1] " in done.stdout and "guide.md" in done.stdout
    for step in STAGES:
        assert step in done.stdout
    assert "stage" in done.stdout and "status" in done.stdout and "reason" in done.stdout


def test_ask_json_is_one_object_with_events(index_dir: Path) -> None:
    done = ragtiller("ask", "QuotaExhaustedError", "--index", str(index_dir), "--json")
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    assert set(payload) == {"documents", "context", "manifest", "events"}
    assert payload["manifest"]["query_type"] == "exact_lexical_lookup"
    assert "QuotaExhaustedError" in payload["documents"][0]["page_content"]
    assert {e["step"] for e in payload["events"]} == set(STAGES)


def test_missing_index_is_one_line_error_not_traceback(tmp_path: Path) -> None:
    done = ragtiller("ask", "anything at all here", "--index", str(tmp_path / "nope"))
    assert done.returncode == 3  # the index exit code (ragtiller.exit_codes.EXIT_INDEX)
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().count("\n") == 0
    assert "ragtiller: error: no index at" in done.stderr


def test_bad_policy_is_a_clear_error(index_dir: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("schema_version: 2\npolicy_id: x\nversion: '1'\nroutes: {}\n", "utf-8")
    done = ragtiller("ask", "some question here", "--index", str(index_dir), "--policy", str(bad))
    assert done.returncode == 2
    assert f"invalid retrieval policy {bad}" in done.stderr
    assert "Traceback" not in done.stderr


def test_empty_corpus_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    done = ragtiller(
        "ingest", str(tmp_path / "empty"), "--index", str(tmp_path / "idx"), "--embedder", "hashing"
    )
    assert done.returncode == 2
    assert "nothing to ingest" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.slow
def test_demo_builds_caches_and_answers_each_route(tmp_path: Path) -> None:
    first = ragtiller("demo", "--embedder", "hashing", "--cache-dir", str(tmp_path))
    assert first.returncode == 0, first.stderr
    assert "building the demo index" in first.stdout
    for route in ("exact_lexical_lookup", "factual_lookup", "synthesis (broad)", "no_retrieval"):
        assert f"route: {route}" in first.stdout
    assert (
        "docstring:builtins.StopAsyncIteration"
        in first.stdout.split("=== 'StopAsyncIteration'")[1].split("===")[0].splitlines()[4]
    )
    again = ragtiller(
        "demo",
        "--embedder",
        "hashing",
        "--cache-dir",
        str(tmp_path),
        "--question",
        "StopAsyncIteration",
    )
    assert again.returncode == 0, again.stderr
    assert "using the cached demo index" in again.stdout
