"""The ``ragtiller`` command, run as a user runs it: a subprocess, its output and exit code."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ragtiller.core.tiers import STAGES

DOCS = {
    "guide.md": "# Guide\n\n## Install\n\nRun pip install ragtiller to install it.\n\n## Errors\n\n"
    "QuotaExhaustedError is raised when the daily chat budget is spent.\n",
    "notes.rst": "Notes\n=====\n\nThe ledger window is the calendar day in UTC by default.\n",
}


def ragtiller(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONWARNINGS": "ignore::DeprecationWarning"}
    return subprocess.run(
        [sys.executable, "-m", "ragtiller", *args],
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
    assert "chunks: 3 added, 0 updated, 0 unchanged, 0 deleted; embedded 3 texts" in done.stdout
    assert done.stderr.count("blob.txt") == 1  # the binary file is skipped, and named once
    return index


def test_ask_prints_documents_and_stage_table_not_the_context(index_dir: Path) -> None:
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
    assert "--- context ---" not in done.stdout
    assert done.stdout.splitlines()[0].startswith("embedder loaded in ")
    # header and table agree on what rerank did
    header = next(line for line in done.stdout.splitlines() if line.startswith("router: "))
    row = next(line for line in done.stdout.splitlines() if line.startswith("rerank "))
    _, status, reason, *_ = row.split()
    assert f"rerank: {status} (" in header
    if status != "done":
        assert f"rerank: {status} ({reason})" in header


def test_ask_context_top_k_namespace_and_tenant(index_dir: Path) -> None:
    question = "what is raised when the QuotaExhaustedError budget is spent"
    with_context = ragtiller("ask", question, "--index", str(index_dir), "--context")
    assert "--- context ---" in with_context.stdout

    one = ragtiller("ask", question, "--index", str(index_dir), "--top-k", "1", "--json")
    payload = json.loads(one.stdout)
    assert len(payload["documents"]) == 1
    assert payload["manifest"]["overrides"] == {"top_k": 1}

    elsewhere = ragtiller("ask", question, "--index", str(index_dir), "--namespace", "wiki")
    assert "namespace 'wiki' not in the index" in elsewhere.stdout
    assert "known" not in elsewhere.stdout  # the index's other namespaces are not the caller's
    nobody = ragtiller("ask", question, "--index", str(index_dir), "--tenant", "zed")
    assert "within the turn's tenant 'zed', namespaces and filter" in nobody.stdout
    assert "overrides: tenant=zed" in nobody.stdout


def test_every_argument_has_help_and_eval_defaults_its_policy() -> None:
    import argparse

    from ragtiller.cli.app import parser

    def check(name: str, command: argparse.ArgumentParser) -> None:
        for action in command._actions:
            if isinstance(action, argparse._SubParsersAction):  # check each subcommand instead
                for sub_name, sub in action.choices.items():
                    check(f"{name} {sub_name}", sub)
            elif not isinstance(action, argparse._HelpAction):
                assert action.help, f"{name} {action.dest} has no help text"

    top = parser()
    check("ragtiller", top)
    args = top.parse_args(["eval", "--index", "i", "--dataset", "d"])
    assert args.policy is None


def test_ask_json_is_one_object_with_events(index_dir: Path) -> None:
    done = ragtiller("ask", "QuotaExhaustedError", "--index", str(index_dir), "--json")
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    assert set(payload) == {"load_ms", "documents", "context", "manifest", "events"}
    assert payload["manifest"]["query_type"] == "exact_lexical_lookup"
    assert "QuotaExhaustedError" in payload["documents"][0]["page_content"]
    assert {e["step"] for e in payload["events"]} == set(STAGES)


def test_missing_index_is_one_line_error_not_traceback(tmp_path: Path) -> None:
    done = ragtiller("ask", "anything at all here", "--index", str(tmp_path / "nope"))
    assert done.returncode == 3  # the index exit code (ragtiller.cli.app.EXIT_INDEX)
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


def test_draw_writes_a_png_offline_and_prints_mermaid(tmp_path: Path) -> None:
    done = ragtiller("draw", "--png", str(tmp_path / "graph.png"))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "graph.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = ragtiller("draw").stdout
    assert "gate" in text and "tier_search" in text and text.startswith("---")


def test_version_and_module_entry_point() -> None:
    done = ragtiller("--version")
    assert done.returncode == 0 and done.stdout.strip() == f"ragtiller {ragtiller_version()}"


def test_shared_options_are_accepted_after_the_subcommand(tmp_path: Path) -> None:
    """``--debug`` before or after the subcommand: the traceback comes with the error line."""
    for args in (
        ["--debug", "ask", "q", "--index", str(tmp_path / "none")],
        ["ask", "q", "--index", str(tmp_path / "none"), "--debug"],
    ):
        done = ragtiller(*args)
        assert done.returncode == 3, done.stderr  # an index store error (README's exit codes)
        assert "Traceback (most recent call last)" in done.stderr
        assert done.stderr.rstrip().splitlines()[-1].startswith("ragtiller: error: no index at")
    plain = ragtiller("ask", "q", "--index", str(tmp_path / "none"))
    assert "Traceback" not in plain.stderr


def ragtiller_version() -> str:
    import tomllib

    pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
    version: str = tomllib.loads(pyproject.read_text("utf-8"))["project"]["version"]
    return version


def test_ask_repeats_a_long_query_cut_not_whole(index_dir: Path) -> None:
    query = "quota budget " * 2000  # a pasted document: 26,000 characters
    done = ragtiller("ask", query, "--index", str(index_dir))
    assert done.returncode == 0, done.stderr
    header = next(line for line in done.stdout.splitlines() if line.startswith("=== "))
    assert header.endswith("... (26,000 characters)")
    assert len(header) < 300
    assert "query truncated to 4000 characters for embedding" in done.stdout
