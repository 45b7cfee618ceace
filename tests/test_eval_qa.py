"""Passage-level QA datasets: the answer-hit rule, the layout, and `ragtiller eval` on one."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fixtures.eval_cli import main
from fixtures.qa_data import HIT_RATE, HITTING, QUESTIONS

from ragtiller.eval import EvalError, dataset_kind, load_dataset, load_qa
from ragtiller.eval.datasets import answers_for, document_key, normalize
from ragtiller.eval.honesty import dataset_fingerprint, index_doc_ids, without_deadlines
from ragtiller.eval.variants import with_depth
from ragtiller.graph.builder import build_graph
from ragtiller.index import open_index
from ragtiller.ingest import ingest
from ragtiller.models import HashingEmbedder
from ragtiller.policies import load_policy

TINY_BEIR = Path(__file__).parent / "data" / "tiny_beir"
SQUAD = Path(__file__).resolve().parents[2] / "shared" / "data" / "squad-dev"
"""The shared collection, beside the repository (as CI checks it out)."""


def eval_json(index: Path, dataset: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> Any:
    argv = ["eval", "--index", str(index), "--dataset", str(dataset), "--json", "--no-progress"]
    assert main([*argv, *extra]) == 0
    return json.loads(capsys.readouterr().out)


# --- the answer-hit rule --------------------------------------------------------------------


def test_answers_match_lower_cased_collapsed_at_word_boundaries() -> None:
    answers = answers_for(["Denver  Broncos", "$5 million"], gold_passage=None)
    assert answers.bounded == ("denver broncos", "$5 million")
    assert answers.held_by("the DENVER\n\tBroncos won")
    assert answers.held_by("(Denver Broncos)")
    assert not answers.held_by("the Denver Broncosville fans")  # a word character follows
    assert answers.held_by("paid $5 million.")
    assert not answers.held_by("paid $5 millions")
    assert not answers_for(["cat"], gold_passage=None).held_by("concatenate")


def test_an_answer_cut_mid_word_in_its_gold_passage_matches_as_a_substring() -> None:
    cut = answers_for(["ectrical fire"], gold_passage="An electrical fire broke out.")
    assert (cut.bounded, cut.anywhere) == ((), ("ectrical fire",))
    assert cut.held_by("the ELECTRICAL fire spread")
    whole = answers_for(["electrical fire"], gold_passage="An electrical fire broke out.")
    assert whole.bounded == ("electrical fire",)
    assert not whole.held_by("anelectrical fire")


def test_empty_answers_are_dropped() -> None:
    assert answers_for(["  ", "Yes", "yes"], gold_passage=None).bounded == ("yes",)
    assert normalize(" A\u00a0 B ") == "a b"


@pytest.mark.skipif(not SQUAD.is_dir(), reason="the shared squad-dev collection is not here")
def test_the_rule_finds_the_nine_cut_answers_the_squad_readme_names() -> None:
    dataset = load_qa(SQUAD, split="questions-1000")
    assert dataset.answers is not None
    cut = sum(len(a.anywhere) for a in dataset.answers.values())
    assert cut == 9  # "the 9 answers that are not at word boundaries in their own gold passage"
    assert len(dataset.queries) == 1000 and len(dataset.documents) == 48


# --- the layout --------------------------------------------------------------------------------


def test_layout_tells_the_kind(qa_root: Path, tmp_path: Path) -> None:
    assert dataset_kind(qa_root) == "passages"
    assert dataset_kind(TINY_BEIR) == "documents"
    both = tmp_path / "both"
    shutil.copytree(qa_root, both)
    shutil.copy(TINY_BEIR / "corpus.jsonl", both / "corpus.jsonl")
    with pytest.raises(EvalError, match=r"holds both a BEIR collection \(corpus.jsonl\)"):
        dataset_kind(both)
    neither = tmp_path / "neither"
    neither.mkdir()
    (neither / "notes.txt").write_text("x", encoding="utf-8")
    with pytest.raises(EvalError, match=r"matches no layout: .*\(found: notes.txt\)"):
        dataset_kind(neither)
    with pytest.raises(EvalError, match="no dataset folder at"):
        dataset_kind(tmp_path / "absent")


def test_load_qa(qa_root: Path) -> None:
    dataset = load_dataset(qa_root)
    assert (dataset.kind, dataset.split, dataset.name) == ("passages", "questions", "harbours")
    assert list(dataset.queries) == [q["id"] for q in QUESTIONS]
    assert dataset.qrels["q-cut"] == {"gamma.md": 1}
    assert dataset.documents == {"alpha.md", "beta.md", "gamma.md"}
    tune, held = dataset.split_halves(seed=0)
    assert tune.answers is not None and set(tune.answers) == set(tune.queries)
    files = dataset_fingerprint(dataset)["files"]
    assert set(files) == {"questions.jsonl", "docs/"}
    assert dataset_fingerprint(held)["kind"] == "passages"


def test_a_changed_document_changes_the_hash(qa_root: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(qa_root, copy)
    before = load_qa(copy).sha256
    (copy / "docs" / "beta.md").write_text("# Beta\n\nchanged Zanzibar\n", encoding="utf-8")
    assert load_qa(copy).sha256 != before


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "not valid JSON"),
        ('{"id": "x", "question": "q", "answers": ["a"], "doc": "zeta.md"}', "not a file under"),
        ('{"id": "x", "question": "q", "answers": "a", "doc": "alpha.md"}', "list of strings"),
        (
            '{"id": "x", "question": "q", "answers": [" "], "doc": "alpha.md"}',
            "no non-empty answer",
        ),
        ('{"id": "x", "answers": ["a"], "doc": "alpha.md"}', "non-empty 'question'"),
    ],
)
def test_bad_question_lines_are_named(
    qa_root: Path, tmp_path: Path, line: str, message: str
) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(qa_root, copy)
    (copy / "questions.jsonl").write_text(line + "\n", encoding="utf-8")
    with pytest.raises(EvalError, match=rf"questions.jsonl:1: .*{message}"):
        load_qa(copy)


def test_a_missing_split_names_the_files_there(qa_root: Path) -> None:
    with pytest.raises(
        EvalError, match=r"missing questions-1000.jsonl; questions files here: questions.jsonl"
    ):
        load_qa(qa_root, split="questions-1000")


def test_index_doc_ids_map_to_dataset_documents() -> None:
    names = frozenset({"a.md", "sub/b.md"})
    assert document_key("a.md", names) == "a.md"
    assert document_key("docs/a.md", names) == "a.md"
    assert document_key("/data/squad/docs/sub/b.md", names) == "sub/b.md"
    assert document_key("other/a.md", names) == "other/a.md"  # not under a docs/ folder


# --- `ragtiller eval` on a QA dataset ----------------------------------------------------------


def test_eval_reports_answer_hits_and_the_text_returned(
    qa_root: Path, qa_index: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = eval_json(qa_index, qa_root, capsys, "--top-k", "20")
    overall = data["metrics"]["all"]
    assert data["dataset"]["kind"] == "passages"
    assert data["dataset"]["coverage"] == {"found": 3, "total": 3}
    assert data["degraded"] == {"turns": 0, "total": 4, "labels": {}}
    for k in (1, 5, 10, 20):
        assert overall[f"hit_at_{k}"] == HIT_RATE
    assert overall["answer_mrr_at_10"] == HIT_RATE
    # The words are those of the documents and context the same graph returns, turn by turn.
    policy = without_deadlines(with_depth(load_policy(), 20))  # what --top-k 20 evaluates
    graph = build_graph(policy, index=open_index(qa_index))
    words, contexts = [], []
    for question in QUESTIONS:
        out = graph.invoke({"query": question["question"]})
        words += [len(d.page_content.split()) for d in out["documents"]]
        contexts.append(len(out["context"].split()))
    assert overall["words_per_passage"] == pytest.approx(sum(words) / len(words))
    assert overall["context_words"]["p50"] == pytest.approx(float(np.percentile(contexts, 50)))
    assert overall["latency_ms"]["total"]["p95"] > 0


def test_hit_at_k_is_not_reported_beyond_the_depth_asked(
    qa_root: Path, qa_index: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    overall = eval_json(qa_index, qa_root, capsys, "--top-k", "5")["metrics"]["all"]
    assert (overall["hit_at_1"], overall["hit_at_5"]) == (HIT_RATE, HIT_RATE)
    assert (overall["hit_at_10"], overall["hit_at_20"]) == (None, None)
    argv = ["eval", "--index", str(qa_index), "--dataset", str(qa_root), "--no-progress"]
    assert main([*argv, "--top-k", "5"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[2].split()[:6] == ["slice", "queries", "hit@1", "hit@5", "hit@10", "hit@20"]
    assert lines[3].split()[:6] == ["all", "4", "0.5000", "0.5000", "-", "-"]


def test_an_index_of_the_dataset_folder_names_documents_under_docs(
    qa_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    index = tmp_path / "idx"
    ingest([qa_root], index, embedder=HashingEmbedder(dim=256), progress=False)
    assert sorted(index_doc_ids(open_index(index))) == [
        "docs/alpha.md",
        "docs/beta.md",
        "docs/gamma.md",
    ]
    data = eval_json(index, qa_root, capsys)
    assert data["dataset"]["coverage"] == {"found": 3, "total": 3}
    assert data["metrics"]["all"]["mrr_at_10"] is not None  # the gold article is found by name


def test_promote_compares_answer_mrr_on_a_qa_dataset(
    qa_root: Path, qa_index: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "decision.json"
    argv = ["promote", "--index", str(qa_index), "--dataset", str(qa_root), "--no-progress"]
    code = main([*argv, "--candidate", "default", "--baseline", "default", "--out", str(out),
                 "--resamples", "200"])  # fmt: skip
    printed = capsys.readouterr().out
    assert code == 0
    artifact = json.loads(out.read_text("utf-8"))
    assert artifact["lifts"]["all"] == {
        "metric": "answer_mrr_at_10", "n": 4, "mean": 0.0, "ci_low": 0.0, "ci_high": 0.0,
    }  # fmt: skip
    assert artifact["dataset"]["kind"] == "passages"
    assert artifact["eval"]["degraded"]["candidate"]["turns"] == 0
    assert "answer MRR@10 per slice" in printed
    assert "PASS min_ndcg_lift[all]: answer MRR@10 lift +0.0000 >= +0.0000" in printed


def test_tune_scores_a_qa_dataset_by_answer_mrr(
    qa_root: Path, qa_index: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    space = tmp_path / "space.yaml"
    space.write_text("fusion.method: [zscore]\n", encoding="utf-8")
    argv = ["tune", "--index", str(qa_index), "--dataset", str(qa_root), "--base", "default"]
    argv += ["--space", str(space), "--out", str(tmp_path / "o"), "--resamples", "200"]
    assert main([*argv, "--no-progress"]) == 1  # every point hits the same: nothing to confirm
    printed = capsys.readouterr().out
    assert "tune answer MRR@10  overrides" in printed
    tune = json.loads((tmp_path / "o" / "promotion.json").read_text("utf-8"))["tune"]
    assert tune["metric"] == "answer_mrr_at_10"
    tune_half, _ = load_qa(qa_root).split_halves(seed=0)
    expected = sum(q in HITTING for q in tune_half.queries) / len(tune_half.queries)
    assert [p["score"] for p in tune["tune_half_scores"]] == [round(expected, 6)] * 2
