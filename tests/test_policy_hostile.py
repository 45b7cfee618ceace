"""Hostile policy input: what a policy file or a per-run ``policy`` can make the server do.

A per-run policy is a name the deployment allows, never a path; a policy file is read only when
it is a regular file within the size limit; its YAML is refused past a depth, alias and
expansion bound; and no error quotes a value from the file. Each refusal names its bound, which
shows it stopped before the work (the times are in ``benchmarks/bench_hostile_policy.py``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from fixtures.fakes import StaticTier, hit
from pydantic import ValidationError

from ragtiller import InputError, PolicyError, build_graph, load_policy
from ragtiller.cli.app import EXIT_USAGE, main
from ragtiller.integrations.langchain import as_retriever, as_tool
from ragtiller.models import HashingEmbedder
from ragtiller.policies.loader import (
    MAX_POLICY_BYTES,
    MAX_YAML_ALIASES,
    MAX_YAML_DEPTH,
    MAX_YAML_NODES,
    POLICY_DIR_ENV,
)
from ragtiller.policies.run_context import RunContext

SECRET = "sk-live-4f9a2c7e1b8d"
DEFAULT_TEXT = (Path(__file__).parents[1] / "ragtiller/policies/shipped/default.yaml").read_text(
    "utf-8"
)
FACTUAL = "which port does the server listen on by default"


def within(seconds: float, call: Callable[[], Any]) -> BaseException | None:
    """Run ``call`` in a daemon thread; fail if it has not returned in ``seconds`` (a hang
    guard, so a regression fails this test instead of blocking the suite)."""
    raised: list[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as e:  # handed back to the test
            raised.append(e)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"still running after {seconds} s"
    return raised[0] if raised else None


def refused(call: Callable[[], Any], error: type[Exception] = PolicyError) -> str:
    """The message of the ``error`` that ``call`` raises within 30 s."""
    raised = within(30, call)
    assert isinstance(raised, error), f"expected {error.__name__}, got {raised!r}"
    return str(raised)


def billion_laughs() -> str:
    lines = ['l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, 10)]
    return "\n".join(lines) + "\n"


# --- reading: regular files only, bounded in size --------------------------------------------


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "policy.yaml"
    os.mkfifo(fifo)
    assert "is a FIFO, not a regular file" in refused(lambda: load_policy(fifo))
    link = tmp_path / "link.yaml"
    link.symlink_to(fifo)
    assert "is a FIFO, not a regular file" in refused(lambda: load_policy(link))


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero")
def test_a_device_is_refused_unread() -> None:
    assert "/dev/zero is a device, not a regular file" in refused(lambda: load_policy("/dev/zero"))


def test_a_directory_is_refused(tmp_path: Path) -> None:
    assert "is a directory, not a regular file" in refused(lambda: load_policy(tmp_path))


def test_a_file_over_the_size_limit_is_refused_unread(tmp_path: Path) -> None:
    huge = tmp_path / "huge.yaml"
    with huge.open("wb") as handle:  # 200 MB, sparse: the size comes from stat, nothing is read
        handle.truncate(200 * 1024 * 1024)
    assert f"is 209715200 bytes, over the {MAX_POLICY_BYTES}-byte limit" in refused(
        lambda: load_policy(huge)
    )
    just_over = tmp_path / "over.yaml"
    just_over.write_bytes(b"#" * (MAX_POLICY_BYTES + 1))
    assert "over the 1048576-byte limit" in refused(lambda: load_policy(just_over))


def test_a_file_at_the_size_limit_is_read(tmp_path: Path) -> None:
    padded = tmp_path / "padded.yaml"
    text = DEFAULT_TEXT + "#" * (MAX_POLICY_BYTES - len(DEFAULT_TEXT.encode()) - 1) + "\n"
    padded.write_text(text, "utf-8")
    assert padded.stat().st_size == MAX_POLICY_BYTES
    assert load_policy(padded) == load_policy()


def test_bytes_that_are_not_utf8_name_the_offset(tmp_path: Path) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes(b"policy_id: caf\xe9\n")
    assert "is not UTF-8 text (bad byte at offset 14)" in refused(lambda: load_policy(path))


# --- YAML: bounded nesting, aliases and expansion --------------------------------------------


@pytest.mark.parametrize(
    ("text", "bound"),
    [
        (billion_laughs(), f"more than {MAX_YAML_NODES} nodes"),
        ("x: " + "[" * 50_000 + "]" * 50_000 + "\n", f"nested deeper than {MAX_YAML_DEPTH}"),
        (
            "x: " + "{a: " * 50_000 + "1" + "}" * 50_000 + "\n",
            f"nested deeper than {MAX_YAML_DEPTH}",
        ),
        ("".join(f"{'  ' * i}- \n" for i in range(200)), f"nested deeper than {MAX_YAML_DEPTH}"),
        ("a: &a [*a]\n", "an alias refers to a node that holds it"),
        (
            "a: &a 1\nb: [" + ", ".join(["*a"] * (MAX_YAML_ALIASES + 1)) + "]\n",
            f"more than {MAX_YAML_ALIASES} aliases",
        ),
        ("x: [" + "1, " * 300_000 + "1]\n", f"more than {MAX_YAML_NODES} nodes"),
        ("x: " + "1" * 5_000 + "\n", "a value YAML cannot construct (ValueError)"),
        ("x: \x00\n", "character 3: a control character YAML does not allow"),
    ],
    ids=[
        "billion-laughs",
        "deep-flow-lists",
        "deep-flow-maps",
        "deep-block-lists",
        "recursive-alias",
        "many-aliases",
        "many-nodes",
        "huge-int",
        "nul",
    ],
)
def test_hostile_yaml_is_a_policy_error_naming_the_bound(
    tmp_path: Path, text: str, bound: str
) -> None:
    path = tmp_path / "hostile.yaml"
    path.write_text(text, "utf-8")
    message = refused(lambda: load_policy(path))
    assert message.startswith(f"invalid retrieval policy {path}: not valid YAML: ")
    assert bound in message


def test_a_policy_may_still_use_a_few_aliases(tmp_path: Path) -> None:
    data = load_policy().model_dump(mode="json")
    text = yaml.safe_dump(data).replace("namespace: default", "namespace: &ns default", 1)
    text = text.replace("namespace: default", "namespace: *ns")
    assert text.count("*ns") >= 2
    path = tmp_path / "aliased.yaml"
    path.write_text(text, "utf-8")
    assert load_policy(path) == load_policy()


# --- errors never quote a value from the file -------------------------------------------------

LEAKY = {
    "json-extra-key": json.dumps({"api_key": SECRET}),
    "wrong-type": DEFAULT_TEXT.replace(
        "policy_id: default-retrieval-policy", f"policy_id: [{SECRET}]"
    ),
    "bad-literal": DEFAULT_TEXT + f"reranker: {{provider: {SECRET}}}\n",
    "validator-quotes": DEFAULT_TEXT + f"quota: {{timezone: {SECRET}}}\n",
    "yaml-syntax": f"api_key: '{SECRET}\n  nested: [\n",
    "yaml-mapping": f"api_key: {SECRET}: more\n",
    "yaml-alias": f"api_key: *{SECRET}\n",
    "yaml-tag": f"api_key: !{SECRET} x\n",
    "yaml-char": f"api_key: {SECRET}\t@x\n`{SECRET}\n",
}


@pytest.mark.parametrize("text", LEAKY.values(), ids=LEAKY.keys())
def test_an_error_never_quotes_a_value_from_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str
) -> None:
    path = tmp_path / "leaky.yaml"
    path.write_text(text, "utf-8")
    assert SECRET in text
    direct = refused(lambda: load_policy(path))
    assert SECRET not in direct and str(path) in direct

    monkeypatch.setenv(POLICY_DIR_ENV, str(tmp_path))
    per_run = refused(lambda: RunContext(policy="leaky"), InputError)
    assert SECRET not in per_run and "policy: " in per_run


def test_the_secret_named_in_json_is_named_by_field_only(tmp_path: Path) -> None:
    path = tmp_path / "creds.json"
    path.write_text(json.dumps({"api_key": SECRET}), "utf-8")
    assert "  api_key: Extra inputs are not permitted" in refused(lambda: load_policy(path))


def test_the_cli_names_the_problem_not_the_secret(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "creds.json"
    path.write_text(json.dumps({"api_key": SECRET}), "utf-8")
    assert (
        main(["ask", "q", "--index", str(tmp_path / "none"), "--policy", str(path)]) == EXIT_USAGE
    )
    err = capsys.readouterr().err
    assert err.startswith(f"ragtiller: error: invalid retrieval policy {path}")
    assert "api_key: Extra inputs are not permitted" in err and SECRET not in err


def hostile_files(tmp_path: Path) -> dict[str, Path]:
    files = {
        "laughs": tmp_path / "laughs.yaml",
        "deep": tmp_path / "deep.yaml",
        "huge": tmp_path / "huge.yaml",
        "fifo": tmp_path / "fifo.yaml",
    }
    files["laughs"].write_text(billion_laughs(), "utf-8")
    files["deep"].write_text("x: " + "[" * 50_000 + "]" * 50_000, "utf-8")
    with files["huge"].open("wb") as handle:
        handle.truncate(200 * 1024 * 1024)
    os.mkfifo(files["fifo"])
    return files


@pytest.mark.parametrize("command", ["ask", "show"])
@pytest.mark.parametrize("kind", ["laughs", "deep", "huge", "fifo"])
def test_the_cli_refuses_each_hostile_file_with_the_usage_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str, command: str
) -> None:
    path = hostile_files(tmp_path)[kind]
    argv = {
        "ask": ["ask", "q", "--index", str(tmp_path / "none"), "--policy", str(path)],
        "show": ["policy", "show", str(path)],
    }[command]
    outcome: list[int] = []
    assert within(30, lambda: outcome.append(main(argv))) is None
    assert outcome == [EXIT_USAGE]
    err = capsys.readouterr().err
    assert err.startswith("ragtiller: error: ") and str(path) in err and err.count("\n") == 1


def test_the_installed_command_refuses_a_fifo_and_a_secret(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    creds = tmp_path / "creds.json"
    creds.write_text(json.dumps({"api_key": SECRET}), "utf-8")
    for path, said in ((fifo, "is a FIFO, not a regular file"), (creds, "api_key: Extra")):
        done = subprocess.run(
            [sys.executable, "-m", "ragtiller", "policy", "show", str(path)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == EXIT_USAGE
        assert said in done.stderr and SECRET not in done.stderr + done.stdout


# --- per-run policies: allowed names only -----------------------------------------------------


def policy_dir(tmp_path: Path, **files: str) -> Path:
    folder = tmp_path / "policies"
    folder.mkdir()
    for name, text in files.items():
        (folder / f"{name}.yaml").write_text(text, "utf-8")
    return folder


def variant_text(policy_id: str) -> str:
    data = yaml.safe_load(DEFAULT_TEXT) | {"policy_id": policy_id}
    data["routes"]["factual_lookup"]["top_k"] = 1
    return yaml.safe_dump(data)


def graph() -> Any:
    docs = [hit("dense", f"c{i}", 0.9 - i / 100, text=f"port {i}") for i in range(8)]
    return build_graph(
        require_tenant=False, embedder=HashingEmbedder(dim=16), tiers=[StaticTier("dense", docs)]
    )


@pytest.mark.parametrize(
    "given",
    ["/etc/passwd", "../../etc/passwd", "policies/strict", "./strict", ".hidden", "x" * 65, ""],
)
def test_a_per_run_policy_is_never_a_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, given: str
) -> None:
    monkeypatch.setenv(POLICY_DIR_ENV, str(policy_dir(tmp_path, initech=variant_text("i"))))
    message = refused(lambda: RunContext(policy=given), InputError)
    assert "a per-run policy is a policy name, not a path; allowed: default, no-llm, or one" in (
        message
    )
    assert "initech" not in message  # the operator's names may be customers'"


@pytest.mark.parametrize("kind", ["creds", "fifo", "device"])
def test_a_remote_client_cannot_name_a_file_on_the_server(tmp_path: Path, kind: str) -> None:
    creds = tmp_path / "creds.json"
    creds.write_text(json.dumps({"api_key": SECRET}), "utf-8")
    os.mkfifo(tmp_path / "fifo.yaml")
    path = {"creds": creds, "fifo": tmp_path / "fifo.yaml", "device": Path("/dev/zero")}[kind]
    context = {"policy": str(path)}
    message = refused(lambda: graph().invoke({"query": FACTUAL}, context=context), InputError)
    assert "not a path; allowed: default, no-llm" in message and SECRET not in message


def test_an_unknown_name_lists_the_shipped_ones_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(POLICY_DIR_ENV, raising=False)
    alone = refused(lambda: RunContext(policy="strict"), InputError)
    assert f"unknown policy 'strict'; allowed: default, no-llm (set {POLICY_DIR_ENV}" in alone
    folder = policy_dir(tmp_path, strict=variant_text("strict"), gold=variant_text("gold"))
    (folder / "notes.txt").write_text("not a policy", "utf-8")
    os.mkfifo(folder / "pipe.yaml")  # not a regular file: not listed
    monkeypatch.setenv(POLICY_DIR_ENV, str(folder))
    listed = refused(lambda: RunContext(policy="silver"), InputError)
    assert f"'silver'; allowed: default, no-llm, or one the operator added to {POLICY_DIR_ENV}" in (
        listed
    )
    assert "gold" not in listed and "strict" not in listed and str(folder) not in listed
    assert "is a FIFO, not a regular file" in refused(lambda: RunContext(policy="pipe"), InputError)


def test_a_policy_in_the_operator_directory_applies_for_one_turn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(POLICY_DIR_ENV, str(policy_dir(tmp_path, strict=variant_text("strict-1"))))
    g = graph()
    out = g.invoke({"query": FACTUAL}, context={"policy": "strict"})
    assert out["manifest"].policy_id == "strict-1" and len(out["documents"]) == 1
    assert g.invoke({"query": FACTUAL}, context={"policy": "no-llm"})["manifest"].policy_id == (
        load_policy("no-llm").policy_id
    )


def test_a_directory_file_cannot_take_a_shipped_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(POLICY_DIR_ENV, str(policy_dir(tmp_path, default=variant_text("mine"))))
    message = refused(lambda: RunContext(policy="default"), InputError)
    assert "takes the name of the shipped policy 'default'; rename the file" in message


def test_a_missing_directory_is_logged_for_the_operator_not_told_to_the_caller(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(POLICY_DIR_ENV, str(tmp_path / "missing"))
    assert RunContext(policy="default").policy == "default"  # shipped names need no directory
    message = refused(lambda: RunContext(policy="strict"), InputError)
    assert "unknown policy 'strict'" in message and str(tmp_path) not in message
    assert f"{POLICY_DIR_ENV}={tmp_path / 'missing'} is not a directory" in caplog.text


def test_an_invalid_operator_policy_is_named_without_its_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = policy_dir(tmp_path, default=variant_text("mine"))
    (folder / "broken.yaml").write_text("routes: 5\n", "utf-8")
    monkeypatch.setenv(POLICY_DIR_ENV, str(folder))
    for name in ("broken", "default"):
        message = refused(lambda: RunContext(policy=name), InputError)  # noqa: B023
        assert f"policy '{name}' in {POLICY_DIR_ENV}" in message and str(tmp_path) not in message


def test_the_graph_policy_may_still_be_a_path(tmp_path: Path) -> None:
    path = tmp_path / "own.yaml"
    path.write_text(variant_text("own-path"), "utf-8")
    tiers = [StaticTier("dense", [hit("dense", f"c{i}", 0.9, text="port") for i in range(4)])]
    out = build_graph(
        path, require_tenant=False, embedder=HashingEmbedder(dim=16), tiers=tiers
    ).invoke({"query": FACTUAL})
    assert out["manifest"].policy_id == "own-path" and len(out["documents"]) == 1


# --- top_k, max_chunks and k are strict ints --------------------------------------------------


@pytest.mark.parametrize("field", ["top_k", "max_chunks"])
@pytest.mark.parametrize("value", ["5", 5.0, True])
def test_top_k_and_max_chunks_are_not_coerced(field: str, value: object) -> None:
    with pytest.raises(InputError, match=rf"  {field}: Input should be a valid integer"):
        RunContext(**{field: value})
    with pytest.raises(InputError, match=rf"  {field}: Input should be a valid integer"):
        graph().invoke({"query": FACTUAL}, context={field: value})
    with pytest.raises(InputError, match=rf"  {field}: Input should be a valid integer"):
        graph().invoke({"query": FACTUAL}, config={"configurable": {"ragtiller": {field: value}}})
    assert RunContext(**{field: 5}).overrides() == {field: 5}


@pytest.mark.parametrize("value", ["3", 3.0, True])
def test_the_retriever_and_tool_k_is_not_coerced(value: object) -> None:
    with pytest.raises(ValidationError, match=r"k\n  Input should be a valid integer"):
        as_retriever(graph(), k=value)
    with pytest.raises(ValidationError, match=r"top_k: Input should be a valid integer"):
        as_retriever(graph(), search_kwargs={"k": value})
    with pytest.raises(InputError, match=r"top_k: Input should be a valid integer"):
        as_retriever(graph()).invoke(FACTUAL, k=value)
    with pytest.raises(InputError, match=r"top_k: Input should be a valid integer"):
        as_tool(graph(), k=value)  # type: ignore[arg-type]
    assert len(as_retriever(graph(), k=3).invoke(FACTUAL)) == 3


# --- through `langgraph dev`, as a remote client -----------------------------------------------


@pytest.mark.slow
async def test_langgraph_dev_refuses_paths_and_serves_allowed_names(tmp_path: Path) -> None:
    from langgraph_sdk import get_client
    from test_studio import DevServer, errors_of

    creds = tmp_path / "creds.json"
    creds.write_text(json.dumps({"api_key": SECRET}), "utf-8")
    os.mkfifo(tmp_path / "fifo.yaml")
    folder = policy_dir(tmp_path, strict=variant_text("strict-1"))
    server = DevServer(tmp_path, env={POLICY_DIR_ENV: str(folder)})
    try:
        url = server.url(timeout_s=120)
        server.wait_ready(url, timeout_s=120)
        not_a_path = "a per-run policy is a policy name, not a path; allowed: default, no-llm, or"
        for given, said in (
            (str(creds), not_a_path),
            (str(tmp_path / "fifo.yaml"), not_a_path),
            ("/dev/zero", not_a_path),
            ("nope", "unknown policy 'nope'; allowed: default, no-llm, or one the operator"),
        ):
            errors = await errors_of(url, input={"query": FACTUAL}, context={"policy": given})
            assert [e["error"] for e in errors] == ["InputError"], errors
            assert said in errors[0]["message"] and SECRET not in json.dumps(errors)
        for value in ("5", 5.0, True):
            errors = await errors_of(url, input={"query": FACTUAL}, context={"top_k": value})
            assert [e["error"] for e in errors] == ["InputError"], errors
            assert "top_k: Input should be a valid integer" in errors[0]["message"]
        async with get_client(url=url) as client:
            for name, policy_id in (("strict", "strict-1"), ("no-llm", "no-llm")):
                thread = await client.threads.create()
                out = await client.runs.wait(
                    thread["thread_id"],
                    "ragtiller",
                    input={"query": FACTUAL},
                    context={"policy": name},
                )
                assert isinstance(out, dict) and "manifest" in out, out
                assert out["manifest"]["policy_id"].startswith(policy_id), out["manifest"]
    finally:
        server.stop()
    assert "BlockingError" not in "".join(server.log)
