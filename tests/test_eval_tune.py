"""`ragtiller tune`, policy variants, and the fingerprints that make promotion evidence travel."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from fixtures.eval_cli import main

from ragtiller.errors import PolicyError
from ragtiller.eval import EvalError, compare_runs, load_beir, run_eval
from ragtiller.eval.honesty import dataset_fingerprint, file_sha256, index_fingerprint
from ragtiller.eval.tuning import load_space
from ragtiller.eval.variants import expand_space, policy_sha256, with_depth, with_overrides
from ragtiller.graph.builder import build_graph
from ragtiller.index import ChunkingConfig, open_index
from ragtiller.ingest import ingest
from ragtiller.models import HashingEmbedder
from ragtiller.policies import load_policy

TINY = Path(__file__).parent / "data" / "tiny_beir"


def build(target: Path, chunk_tokens: int) -> Path:
    ingest(
        [TINY / "corpus.jsonl"],
        target,
        embedder=HashingEmbedder(dim=256),
        chunking=ChunkingConfig(chunk_tokens=chunk_tokens, overlap_tokens=2),
        progress=False,
    )
    return target


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("idx") / "tiny", 512)


def test_with_depth_and_overrides_leave_the_original_alone() -> None:
    base = load_policy()
    deep = with_depth(base, 100)
    assert {r.top_k for r in deep.routes.values()} == {100}
    assert deep.budgets.max_chunks == 100
    assert deep.routes["synthesis"].parent_child == base.routes["synthesis"].parent_child
    assert base.budgets.max_chunks == 12
    changed = with_overrides(base, {"fusion.method": "zscore", "routes.synthesis.rerank": True})
    assert (changed.fusion.method, changed.routes["synthesis"].rerank) == ("zscore", True)
    assert policy_sha256(changed) != policy_sha256(base)
    assert policy_sha256(load_policy()) == policy_sha256(base)


def test_bad_overrides_name_the_field() -> None:
    with pytest.raises(PolicyError, match=r"fusion\.doc_aggregation"):
        with_overrides(load_policy(), {"fusion.doc_aggregation": False})  # YAML's bare off


def test_space_expansion_and_loading(tmp_path: Path) -> None:
    assert expand_space({"a": [1, 2], "b": ["x"]}) == [{"a": 1, "b": "x"}, {"a": 2, "b": "x"}]
    space = tmp_path / "space.yaml"
    space.write_text('fusion.method: [rrf, zscore]\nfusion.doc_aggregation: ["off", max]\n')
    assert len(expand_space(load_space(space))) == 4
    space.write_text("fusion.method: rrf\n")
    with pytest.raises(PolicyError, match="non-empty list"):
        load_space(space)


def test_runs_on_different_indexes_are_refused(index_dir: Path, tmp_path: Path) -> None:
    dataset = load_beir(TINY)
    small = open_index(build(tmp_path / "small-chunks", 6))
    big = open_index(index_dir)
    assert index_fingerprint(small) != index_fingerprint(big)
    assert index_fingerprint(open_index(index_dir)) == index_fingerprint(big)  # reopened: same
    policy = load_policy()

    def run(index: object) -> object:
        graph = build_graph(policy, index=index)  # type: ignore[arg-type]
        return replace(run_eval(graph, dataset, progress=False), index=index_fingerprint(index))

    a, b = run(small), run(big)
    with pytest.raises(EvalError, match="different indexes"):
        compare_runs(a, b, dataset, n_resamples=200)  # type: ignore[arg-type]
    compare_runs(b, run(big), dataset, n_resamples=200)  # type: ignore[arg-type]


def test_promotion_artifact_records_files_index_and_policy_hashes(
    index_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "decision.json"
    argv = ["promote", "--index", str(index_dir), "--dataset", str(TINY), "--no-progress"]
    code = main(
        [*argv, "--candidate", "default", "--baseline", "default", "--out", str(out),
         "--resamples", "200"]
    )  # fmt: skip
    assert code == 0
    artifact = json.loads(out.read_text("utf-8"))
    assert artifact["schema_version"] == 1
    assert artifact["dataset"]["files"] == {
        "corpus.jsonl": file_sha256(TINY / "corpus.jsonl"),
        "queries.jsonl": file_sha256(TINY / "queries.jsonl"),
        "qrels/test.tsv": file_sha256(TINY / "qrels" / "test.tsv"),
    }
    assert artifact["dataset"] == {
        **dataset_fingerprint(load_beir(TINY)),
        "slices_from": "baseline-route",
    }
    assert artifact["index"]["embedder"] == {
        "name": "ragtiller/hashing-v1-ngram0.25",
        "dimension": 256,
    }
    assert artifact["index"]["chunking"] == {
        "chunk_tokens": 512,
        "overlap_tokens": 2,
        "header": "path",
        "window": "words",
    }
    digest = policy_sha256(load_policy())
    assert artifact["candidate"]["sha256"] == artifact["baseline"]["sha256"] == digest


def test_tune_writes_candidate_and_artifact(
    index_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    space = tmp_path / "space.yaml"
    # one result per route cannot beat the base on q1/q3 (two relevant docs each)
    space.write_text(
        yaml.safe_dump({"routes.factual_lookup.top_k": [1], "fusion.method": ["rrf", "minmax"]})
    )
    out = tmp_path / "tuned"
    argv = ["tune", "--index", str(index_dir), "--dataset", str(TINY), "--base", "default"]
    code = main([*argv, "--space", str(space), "--out", str(out), "--resamples", "200",
                 "--no-progress"])  # fmt: skip
    printed = capsys.readouterr().out
    artifact = json.loads((out / "promotion.json").read_text("utf-8"))
    tune = artifact["tune"]
    assert tune["metric"] == "ndcg_at_10"
    assert [p["overrides"] for p in tune["tune_half_scores"]] == [
        {},
        {"routes.factual_lookup.top_k": 1, "fusion.method": "rrf"},
        {"routes.factual_lookup.top_k": 1, "fusion.method": "minmax"},
    ]
    best = max(tune["tune_half_scores"], key=lambda p: p["score"])
    assert tune["chosen"] == best["overrides"]
    candidate = load_policy(out / "candidate.yaml")
    assert candidate.policy_id == "default-retrieval-policy-tuned"
    assert artifact["candidate"]["sha256"] == policy_sha256(candidate)
    assert artifact["dataset"]["name"] == "tiny_beir[heldout-seed0]"
    assert artifact["index"]["chunking"]["chunk_tokens"] == 512
    # exit 0 exactly when the held-out half confirmed a positive lift
    lift = artifact["lifts"]["all"]["mean"]
    confirmed = artifact["decision"] == "promote" and lift is not None and lift > 0
    assert tune["confirmed_on_held_out"] is confirmed
    assert code == (0 if confirmed else 1)
    assert ("NOT confirmed" in printed) is (not confirmed)


def test_tune_with_a_bad_space_is_one_line_exit_2(
    index_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    space = tmp_path / "space.yaml"
    space.write_text("fusion.method: [bogus]\n")
    argv = ["tune", "--index", str(index_dir), "--dataset", str(TINY), "--base", "default"]
    assert main([*argv, "--space", str(space), "--out", str(tmp_path / "o"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ragtiller tune: error: overrides {'fusion.method': 'bogus'}")
    assert err.count("\n") == 1
