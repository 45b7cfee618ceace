import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from fixtures.eval_cli import main

from ragtiller.index.versions import current_version
from ragtiller.policies import load_policy

TINY = Path(__file__).parent / "data" / "tiny_beir"
DEFAULT_YAML = Path(__file__).parents[1] / "ragtiller" / "policies" / "shipped" / "default.yaml"


def write_policy(path: Path, **changes: Any) -> Path:
    data = yaml.safe_load(DEFAULT_YAML.read_text("utf-8"))
    for key, value in changes.items():
        data[key] = value
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def small_routes(top_k: int) -> dict[str, Any]:
    return {
        name: {"namespace": "default", "top_k": top_k}
        for name in ("factual_lookup", "exact_lexical_lookup", "synthesis")
    }


def test_eval_prints_a_table_per_slice(
    tiny_beir_index: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["eval", "--index", str(tiny_beir_index), "--dataset", str(TINY), "--policy", "default"]
    assert main([*argv, "--slices", str(TINY / "slices.tsv"), "--no-progress"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].startswith(f"policy default-retrieval-policy @ {load_policy().version}")
    assert lines[1].startswith("index holds 7 of the dataset's 7 judged documents")
    assert "deadlines lifted to 600 s for the eval" in lines[1]
    assert lines[2].split()[:4] == ["slice", "queries", "no-rel", "NDCG@10"]
    assert lines[2].split()[-1] == "degraded"
    assert [line.split()[0] for line in lines[3:-1]] == ["all", "factual", "lexical", "synthesis"]
    assert [line.split()[-1] for line in lines[3:-1]] == ["0", "0", "0", "0"]
    assert lines[-1] == "0 of 5 turns degraded"


def test_eval_json(tiny_beir_index: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["eval", "--index", str(tiny_beir_index), "--dataset", str(TINY), "--policy", "default"]
    assert main([*argv, "--json", "--no-progress", "--concurrency", "2"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["dataset"]["n_queries"] == 5
    assert data["dataset"]["slices_from"] == "route"
    overall = data["metrics"]["all"]
    assert (overall["n_queries"], overall["n_no_relevant"]) == (5, 1)
    assert 0.0 <= overall["ndcg_at_10"] <= 1.0
    assert overall["latency_ms"]["total"]["p95"] > 0
    assert overall["llm_calls_per_turn"] == 0.0


def promote(tiny_beir_index: Path, candidate: Path, *extra: str) -> int:
    return main(
        [
            "promote",
            "--candidate",
            str(candidate),
            "--baseline",
            "default",
            "--index",
            str(tiny_beir_index),
            "--dataset",
            str(TINY),
            "--slices",
            str(TINY / "slices.tsv"),
            "--no-progress",
            "--resamples",
            "200",
            *extra,
        ]
    )


def test_promote_an_equal_candidate(
    tiny_beir_index: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    candidate = write_policy(
        tmp_path / "cand.yaml",
        policy_id="candidate",
        promotion={"required_slices": ["lexical"], "max_llm_calls_per_turn": 0},
    )
    out_file = tmp_path / "out" / "decision.json"
    assert promote(tiny_beir_index, candidate, "--out", str(out_file)) == 0
    printed = capsys.readouterr().out
    assert "PASS required_slices[lexical]: 2 judged queries in the slice" in printed
    assert printed.rstrip().endswith(f"decision: promote (decision written to {out_file})")
    artifact = json.loads(out_file.read_text("utf-8"))
    assert artifact["decision"] == "promote"
    assert artifact["candidate"]["policy_id"] == "candidate"
    assert artifact["baseline"]["policy_id"] == "default-retrieval-policy"
    assert artifact["lifts"]["all"]["mean"] == 0.0


def test_reject_a_worse_candidate(
    tiny_beir_index: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # One document per query loses q1's and q3's second relevant document.
    candidate = write_policy(tmp_path / "cand.yaml", policy_id="tiny", routes=small_routes(1))
    assert promote(tiny_beir_index, candidate, "--json") == 1
    artifact = json.loads(capsys.readouterr().out)
    assert artifact["decision"] == "reject"
    assert artifact["lifts"]["all"]["mean"] < 0
    failed = {(r["rule"], r["scope"]) for r in artifact["reasons"] if not r["passed"]}
    assert ("min_ndcg_lift", "all") in failed


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--index", "{missing}"], "ragtiller {cmd}: error: no index at"),
        (["--dataset", "{missing}"], "ragtiller {cmd}: error: no dataset folder at"),
        (["--policy", "{bad}"], "ragtiller {cmd}: error: invalid retrieval policy"),
    ],
)
def test_errors_are_one_line_with_exit_2(
    tiny_beir_index: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    message: str,
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("schema_version: 2\npolicy_id: x\n", encoding="utf-8")
    values = {
        "--index": str(tiny_beir_index),
        "--dataset": str(TINY),
        "--policy": "default",
    }
    values[argv[0]] = argv[1].format(missing=tmp_path / "missing", bad=bad)
    for cmd in ("eval", "promote"):
        args = [cmd, "--index", values["--index"], "--dataset", values["--dataset"]]
        if cmd == "eval":
            args += ["--policy", values["--policy"]]
        else:
            args += ["--candidate", values["--policy"], "--baseline", "default"]
        assert main([*args, "--no-progress"]) == 2
        err = capsys.readouterr().err
        assert err.startswith(message.format(cmd=cmd))
        assert err.count("\n") == 1
        assert "Traceback" not in err


def test_an_index_built_with_an_unknown_embedder_is_refused(
    tiny_beir_index: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    copy = tmp_path / "idx"
    shutil.copytree(tiny_beir_index, copy)
    manifest_file = current_version(copy) / "manifest.json"  # the index is versioned
    manifest = json.loads(manifest_file.read_text("utf-8"))
    manifest["embedder"]["name"] = "acme/secret-model"
    manifest_file.write_text(json.dumps(manifest), encoding="utf-8")
    argv = ["eval", "--index", str(copy), "--dataset", str(TINY), "--policy", "default"]
    assert main([*argv, "--no-progress"]) == 2
    assert "embedder 'acme/secret-model', which the command line cannot construct" in (
        capsys.readouterr().err
    )


def test_eval_says_which_turns_the_router_did_not_search(
    tiny_beir_index: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a keyword under the router's 12 characters gets no search (issue 2's rule) and scores 0;
    # the eval must say so rather than leave a low figure unexplained
    dataset = tmp_path / "short"
    shutil.copytree(TINY, dataset)
    with (dataset / "queries.jsonl").open("a", encoding="utf-8") as f:
        f.write(json.dumps({"_id": "short", "text": "flutter"}) + "\n")
    qrels = dataset / "qrels" / "test.tsv"
    judged = qrels.read_text("utf-8").splitlines()[1].split("\t")[1]
    qrels.write_text(qrels.read_text("utf-8") + f"short\t{judged}\t1\n", encoding="utf-8")
    argv = ["eval", "--index", str(tiny_beir_index), "--dataset", str(dataset), "--no-progress"]
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-2] == "1 of 6 turns not searched (the router's rule; they score 0): too-short (1)"
    assert lines[-1] == "0 of 6 turns degraded"
    assert main([*argv, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["not_searched"] == {"turns": 1, "total": 6, "reasons": {"too-short": 1}}
    assert data["metrics"]["no_retrieval"]["ndcg_at_10"] == 0.0


def test_a_split_without_judged_queries_is_an_error_not_an_empty_pass(
    tiny_beir_index: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty"
    shutil.copytree(TINY, empty)
    (empty / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n", encoding="utf-8")
    args = ["eval", "--index", str(tiny_beir_index), "--dataset", str(empty), "--no-progress"]
    assert main(args) == 2
    assert "no judged query to evaluate" in capsys.readouterr().err
