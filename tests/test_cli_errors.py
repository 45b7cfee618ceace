"""The ``ragtiller`` command never prints a traceback unless asked: one line, one exit code per kind."""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from ragtiller.cli import app as cli
from ragtiller.cli.app import (
    EXIT_INDEX,
    EXIT_INTERRUPTED,
    EXIT_PROVIDER,
    EXIT_STORE,
    EXIT_UNEXPECTED,
    EXIT_USAGE,
    error_line,
    exit_code,
)
from ragtiller.errors import (
    ConfigurationError,
    EmbeddingError,
    IndexStoreError,
    IngestError,
    PolicyError,
    StoreUnavailableError,
    TierUnavailable,
)
from ragtiller.eval import EvalError

UNDECODABLE = os.fsdecode(b"how do I compute lift \xff?")
"""What Python makes of ``ragtiller ask $'how do I compute lift \\xff?'``."""


def ragtiller(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ragtiller", *args],
        capture_output=True,
        text=True,
        errors="surrogateescape",
        timeout=300,
        env={**os.environ, "PYTHONWARNINGS": "ignore::DeprecationWarning", **env},
    )


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    corpus = tmp_path_factory.mktemp("corpus")
    (corpus / "rules.md").write_text(
        "# Association rules\n\n## Lift\n\nCompute lift as confidence divided by the expected "
        "confidence of the consequent.\n\n## Support\n\nSupport is the share of baskets.\n",
        "utf-8",
    )
    index = tmp_path_factory.mktemp("idx") / "index"
    done = ragtiller("ingest", str(corpus), "--index", str(index), "--embedder", "hashing")
    assert done.returncode == 0, done.stderr
    return index


def test_an_undecodable_question_from_argv_is_answered(index_dir: Path) -> None:
    done = ragtiller("ask", UNDECODABLE, "--index", str(index_dir))
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert "[1] " in done.stdout and "rules.md" in done.stdout
    assert "lift \\udcff?" in done.stdout  # the question is echoed escaped


def test_an_undecodable_question_gives_valid_json(index_dir: Path) -> None:
    done = ragtiller("ask", UNDECODABLE, "--index", str(index_dir), "--json")
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    assert "Compute lift" in payload["documents"][0]["page_content"]


def test_a_dead_redis_still_answers_without_a_traceback(index_dir: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    done = ragtiller(
        "ask", UNDECODABLE, "--index", str(index_dir), REDIS_URL=f"redis://127.0.0.1:{port}/0"
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert "[1] " in done.stdout


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("notaurl", "Redis URL must specify one of the following schemes"),
        ("redis://:s3cret-pw@localhost:notaport/0", "Port could not be cast to integer value"),
        ("redis://localhost:99999/0", "Port out of range"),
    ],
)
def test_a_malformed_redis_url_is_a_configuration_error(
    index_dir: Path, url: str, problem: str
) -> None:
    done = ragtiller(
        "ask", "what is lift in association rules", "--index", str(index_dir), REDIS_URL=url
    )
    assert done.returncode == EXIT_USAGE, done.stderr
    assert done.stderr.startswith("ragtiller: error: the Redis URL (REDIS_URL) is not valid: ")
    assert problem in done.stderr and done.stderr.count("\n") == 1
    assert "s3cret" not in done.stderr


def test_a_missing_index_is_one_line_and_the_index_exit_code(tmp_path: Path) -> None:
    done = ragtiller("ask", "anything at all here", "--index", str(tmp_path / "nope"))
    assert done.returncode == EXIT_INDEX == 3
    assert done.stderr.startswith("ragtiller: error: no index at")
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


def test_a_policy_error_is_folded_into_one_line(index_dir: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "schema_version: 2\npolicy_id: x\nversion: '1'\nroutes: {}\n"
        "deadlines: {turn_s: .inf}\nfusion: {tier_weights: {dense: -1}}\n",
        "utf-8",
    )
    done = ragtiller("ask", "some question", "--index", str(index_dir), "--policy", str(bad))
    assert done.returncode == EXIT_USAGE
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith(f"ragtiller: error: invalid retrieval policy {bad}: ")
    problems = done.stderr.split(f"{bad}: ", 1)[1].rstrip("\n").split("; ")
    assert sorted(problems) == [
        "deadlines.turn_s: Input should be a finite number",  # never the file's value
        "fusion.tier_weights.dense: Input should be greater than or equal to 0",
    ]


def test_a_usage_error_is_argparse_s_exit_code_2() -> None:
    done = ragtiller("ask")
    assert done.returncode == EXIT_USAGE
    assert "the following arguments are required: question" in done.stderr


def _raising(error: BaseException) -> object:
    def command(args: argparse.Namespace) -> int:
        raise error

    return command


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (TypeError("unsupported operand type(s) for +: 'int' and 'str'"), EXIT_UNEXPECTED),
        (RuntimeError("the provider said: Authorization: Bearer sk-live-abc123def456"), 1),
        (IndexStoreError("index built with another embedder"), EXIT_INDEX),
        (StoreUnavailableError("Redis failed: TimeoutError"), EXIT_STORE),
        (EmbeddingError("embedder failed after 3 attempts"), EXIT_PROVIDER),
        (KeyboardInterrupt(), EXIT_INTERRUPTED),
    ],
)
def test_every_exception_is_one_line_and_its_exit_code(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    error: BaseException,
    code: int,
) -> None:
    monkeypatch.setattr(cli, "_ask", _raising(error))
    assert cli.main(["ask", "q", "--index", "x"]) == code
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err == error_line(error) + "\n"
    assert "sk-live" not in err


def test_debug_adds_the_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(cli, "_ask", _raising(ValueError("bad value 42")))
    assert cli.main(["--debug", "ask", "q", "--index", "x"]) == EXIT_UNEXPECTED
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last):")
    assert "raise error" in err
    assert err.splitlines()[-1] == "ragtiller: unexpected error: ValueError: bad value 42"


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (PolicyError("x"), EXIT_USAGE),
        (ConfigurationError("x"), EXIT_USAGE),
        (IngestError("x"), EXIT_USAGE),
        (EvalError("x"), EXIT_USAGE),
        (IndexStoreError("x"), EXIT_INDEX),
        (StoreUnavailableError("x"), EXIT_STORE),
        (EmbeddingError("x"), EXIT_PROVIDER),
        (TierUnavailable("no-credentials"), EXIT_PROVIDER),
        (OSError("disk full"), EXIT_UNEXPECTED),
        (KeyboardInterrupt(), EXIT_INTERRUPTED),
    ],
)
def test_exit_codes_by_class(error: BaseException, code: int) -> None:
    assert exit_code(error) == code


def test_the_error_line_names_an_unexpected_error_and_hints_at_debug() -> None:
    assert error_line(KeyError("chat_gen")) == (
        "ragtiller: unexpected error: KeyError: 'chat_gen' (rerun with --debug for the traceback)"
    )
    assert error_line(RuntimeError(), debug=True) == ("ragtiller: unexpected error: RuntimeError")
