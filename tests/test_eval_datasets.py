import json
from pathlib import Path

import pytest

from ragtiller.eval import EvalError, load_beir, load_slice_labels
from ragtiller.eval.datasets import read_qrels

TINY = Path(__file__).parent / "data" / "tiny_beir"


def test_load_test_split_keeps_only_judged_queries_in_qrels_order() -> None:
    ds = load_beir(TINY)
    assert list(ds.queries) == ["q1", "q2", "q3", "q4", "q5"]
    assert ds.qrels["q1"] == {"d1": 2, "d2": 1}
    assert ds.qrels["q4"] == {"d6": 0}
    assert ds.labels is None
    assert ds.name == "tiny_beir"
    assert ds.corpus_path == TINY / "corpus.jsonl"


def test_other_split_and_slice_labels() -> None:
    dev = load_beir(TINY, split="dev")
    assert dict(dev.queries) == {"q6": "rocket nozzle exit velocity"}
    labelled = load_beir(TINY, slices=TINY / "slices.tsv")
    assert labelled.labels == {
        "q1": "lexical",
        "q2": "lexical",
        "q3": "synthesis",
        "q4": "synthesis",
        "q5": "factual",
    }


def test_hash_is_stable_and_covers_split_and_slices(tmp_path: Path) -> None:
    base = load_beir(TINY).sha256
    assert base == load_beir(TINY).sha256
    assert len(base) == 64
    assert load_beir(TINY, split="dev").sha256 != base
    assert load_beir(TINY, slices=TINY / "slices.tsv").sha256 != base


def test_unlisted_queries_get_the_unlabelled_slice_and_json_mapping(tmp_path: Path) -> None:
    mapping = tmp_path / "slices.json"
    mapping.write_text(json.dumps({"q1": "lexical"}), encoding="utf-8")
    labels = load_beir(TINY, slices=mapping).labels
    assert labels is not None
    assert labels["q1"] == "lexical"
    assert labels["q2"] == "unlabelled"


def _copy_tiny(tmp_path: Path) -> Path:
    root = tmp_path / "ds"
    (root / "qrels").mkdir(parents=True)
    for name in ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv"):
        (root / name).write_bytes((TINY / name).read_bytes())
    return root


def test_missing_file_is_named(tmp_path: Path) -> None:
    root = _copy_tiny(tmp_path)
    (root / "qrels" / "test.tsv").unlink()
    with pytest.raises(EvalError, match=r"missing qrels/test.tsv"):
        load_beir(root)


def test_qrels_errors(tmp_path: Path) -> None:
    root = _copy_tiny(tmp_path)
    qrels = root / "qrels" / "test.tsv"
    qrels.write_text("q1\td1\t1\n", encoding="utf-8")
    with pytest.raises(EvalError, match="expected the header"):
        read_qrels(qrels)
    qrels.write_text("query-id\tcorpus-id\tscore\nq1\td1\thigh\n", encoding="utf-8")
    with pytest.raises(EvalError, match=r"test.tsv:2: score must be an integer, got 'high'"):
        read_qrels(qrels)
    qrels.write_text("query-id\tcorpus-id\tscore\nq9\td1\t1\n", encoding="utf-8")
    with pytest.raises(EvalError, match=r"query ids not in queries\.jsonl: q9"):
        load_beir(root)


def test_slice_file_errors(tmp_path: Path) -> None:
    bad_tsv = tmp_path / "s.tsv"
    bad_tsv.write_text("q1\n", encoding="utf-8")
    with pytest.raises(EvalError, match=r"s.tsv:1: expected 'query-id<TAB>slice'"):
        load_slice_labels(bad_tsv)
    bad_json = tmp_path / "s.json"
    bad_json.write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(EvalError, match="expected a JSON object"):
        load_slice_labels(bad_json)
    with pytest.raises(EvalError, match="cannot read slice file"):
        load_slice_labels(tmp_path / "absent.tsv")
    reserved = tmp_path / "r.json"
    reserved.write_text(json.dumps({"q1": "all"}), encoding="utf-8")
    with pytest.raises(EvalError, match="'all' is reserved"):
        load_beir(TINY, slices=reserved)


def test_subset_keeps_dataset_order_and_gets_its_own_hash() -> None:
    ds = load_beir(TINY, slices=TINY / "slices.tsv")
    sub = ds.subset(["q5", "q1"], label="pick")
    assert list(sub.queries) == ["q1", "q5"]
    assert set(sub.qrels) == {"q1", "q5"}
    assert sub.labels == {"q1": "lexical", "q5": "factual"}
    assert sub.name == "tiny_beir[pick]"
    assert sub.sha256 not in (ds.sha256, ds.subset(["q1", "q5"], label="other").sha256)
    with pytest.raises(EvalError, match="not queries of tiny_beir/test: q9"):
        ds.subset(["q9"], label="x")


def test_split_halves_is_seeded_disjoint_and_complete() -> None:
    ds = load_beir(TINY)
    tune, held = ds.split_halves(seed=3)
    assert (len(tune.queries), len(held.queries)) == (3, 2)
    assert set(tune.queries).isdisjoint(held.queries)
    assert set(tune.queries) | set(held.queries) == set(ds.queries)
    again = ds.split_halves(seed=3)
    assert (list(again[0].queries), again[0].sha256) == (list(tune.queries), tune.sha256)
    assert {tuple(ds.split_halves(seed=s)[0].queries) for s in range(10)} != {tuple(tune.queries)}
