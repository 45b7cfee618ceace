"""Eval figures one can stand behind: the right index, no degraded turn, no live deadline."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from fixtures.eval_cli import main
from langchain_core.documents import Document

from ragtiller.eval.honesty import EVAL_DEADLINE_S, depth_line, without_deadlines
from ragtiller.eval.metrics import score_query
from ragtiller.eval.runner import ranking_from_documents
from ragtiller.eval.variants import with_depth
from ragtiller.graph.builder import build_graph
from ragtiller.index import open_index
from ragtiller.ingest import ingest
from ragtiller.models import HashingEmbedder
from ragtiller.policies import load_policy

TINY = Path(__file__).parent / "data" / "tiny_beir"
DEFAULT_YAML = Path(__file__).parents[1] / "ragtiller" / "policies" / "shipped" / "default.yaml"


def policy_file(path: Path, section: str, **fields: Any) -> Path:
    data = yaml.safe_load(DEFAULT_YAML.read_text("utf-8"))
    data[section] = {**data.get(section, {}), **fields}
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


# --- the index holds the dataset's documents ----------------------------------------------------


@pytest.mark.parametrize("kind", ["beir-on-qa-index", "qa-on-beir-index"])
def test_an_index_without_the_datasets_documents_is_an_error(
    kind: str,
    tiny_beir_index: Path,
    qa_root: Path,
    qa_index: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Before: every metric printed as 0 and the exit code was 0.
    index, dataset = (qa_index, TINY) if kind == "beir-on-qa-index" else (tiny_beir_index, qa_root)
    for cmd in (["eval"], ["promote", "--candidate", "default", "--baseline", "default"]):
        argv = [*cmd, "--index", str(index), "--dataset", str(dataset), "--no-progress"]
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"ragtiller {cmd[0]}: error: the index and dataset ")
        assert "share no document" in err and "every metric would be 0" in err
        assert err.count("\n") == 1


def test_the_report_says_how_much_of_the_dataset_the_index_holds(
    tiny_beir_index: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    partial = tmp_path / "partial"
    kept = [
        line for line in (TINY / "corpus.jsonl").read_text("utf-8").splitlines() if '"d1"' in line
    ]
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("\n".join(kept) + "\n", encoding="utf-8")
    ingest([corpus], partial, embedder=HashingEmbedder(dim=256), progress=False)
    argv = ["eval", "--index", str(partial), "--dataset", str(TINY), "--no-progress"]
    assert main(argv) == 0
    assert "index holds 1 of the dataset's 7 judged documents" in capsys.readouterr().out


# --- degraded turns -----------------------------------------------------------------------------


def test_degraded_turns_fail_the_eval_unless_allowed(
    tiny_beir_index: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Every tiny query is longer than 12 characters, so every turn is truncated, labelled.
    policy = policy_file(tmp_path / "short.yaml", "budgets", max_query_chars=12)
    label = "query truncated to 12 characters for embedding"
    argv = [
        "eval",
        "--index",
        str(tiny_beir_index),
        "--dataset",
        str(TINY),
        "--policy",
        str(policy),
    ]
    assert main([*argv, "--no-progress"]) == 2
    captured = capsys.readouterr()
    assert captured.out.splitlines()[-1] == f"5 of 5 turns degraded: {label} (5)"
    assert captured.err == (
        f"ragtiller eval: error: default-retrieval-policy on tiny_beir: 5 of 5 turns degraded: "
        f"{label} (5); these figures are not the policy's. Fix the cause, or pass "
        "--allow-degraded to report them anyway\n"
    )
    assert main([*argv, "--no-progress", "--allow-degraded", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["degraded"] == {"turns": 5, "total": 5, "labels": {label: 5}}
    assert data["metrics"]["all"]["degraded_turns"] == 5


def test_promote_refuses_a_degraded_run(
    tiny_beir_index: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = policy_file(tmp_path / "short.yaml", "budgets", max_query_chars=12)
    argv = ["promote", "--index", str(tiny_beir_index), "--dataset", str(TINY), "--no-progress"]
    argv += ["--candidate", str(policy), "--baseline", "default", "--resamples", "200"]
    assert main(argv) == 2
    assert "5 of 5 turns degraded" in capsys.readouterr().err
    out = tmp_path / "d.json"
    assert main([*argv, "--allow-degraded", "--out", str(out)]) in (0, 1)
    recorded = json.loads(out.read_text("utf-8"))["eval"]
    assert recorded["deadlines_s"] == EVAL_DEADLINE_S
    assert recorded["degraded"]["candidate"]["turns"] == 5
    assert recorded["degraded"]["baseline"]["turns"] == 0


# --- live deadlines do not cut an eval ----------------------------------------------------------


def test_eval_runs_without_the_policys_deadlines(
    qa_root: Path, qa_index: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hasty = policy_file(tmp_path / "hasty.yaml", "deadlines", embed_s=1e-6)
    policy = load_policy(hasty)
    # Served live, this policy cuts the embedder off on every turn...
    live = build_graph(policy, index=open_index(qa_index)).invoke(
        {"query": "where do the clove ships sail"}
    )
    assert "embed failed: lexical tier only" in live["manifest"].degraded
    # ...but its eval runs with the deadlines lifted, and says so.
    assert without_deadlines(policy).deadlines.model_dump() == {
        name: EVAL_DEADLINE_S for name in policy.deadlines.model_dump()
    }
    argv = ["eval", "--index", str(qa_index), "--dataset", str(qa_root), "--policy", str(hasty)]
    assert main([*argv, "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "deadlines lifted to 600 s for the eval (the policy's: embed_s 1e-06, tier_s 5," in out
    assert out.splitlines()[-1] == "0 of 4 turns degraded"


# --- document metrics count each document once --------------------------------------------------


def passages(*doc_ids: str) -> list[Document]:
    return [
        Document(page_content="", id=f"{d}#{n}", metadata={"doc_id": d})
        for n, d in enumerate(doc_ids)
    ]


def test_several_passages_of_one_document_neither_help_nor_hurt() -> None:
    grades = {"d1": 2, "d2": 1, "d3": 1}
    once = ranking_from_documents(passages("d1", "d4", "d2"))
    repeated = ranking_from_documents(passages("d1", "d1", "d4", "d1", "d4", "d2", "d2"))
    assert once == repeated == ("d1", "d4", "d2")
    assert score_query(repeated, grades) == score_query(once, grades)


def test_the_report_says_when_top_k_asks_the_tiers_for_more_than_a_turn_does() -> None:
    policy = load_policy()
    assert depth_line(policy, with_depth(policy, 5)) is None  # max_chunks stays 12: 36 hits
    deeper = depth_line(policy, with_depth(policy, 100))
    assert deeper == (
        "each tier asked for 300 hits, a turn of this policy for 36: the top of this ranking "
        "can differ from a turn's (docs/eval.md)"
    )


def test_eval_prints_the_depth_it_measured_at(
    tiny_beir_index: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["eval", "--index", str(tiny_beir_index), "--dataset", str(TINY), "--no-progress"]
    assert main([*argv, "--top-k", "100"]) == 0
    assert capsys.readouterr().out.splitlines()[2].startswith("each tier asked for 300 hits")
    assert main([*argv, "--top-k", "100", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["depth"].startswith("each tier asked for 300")
    assert main([*argv, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["depth"] is None
