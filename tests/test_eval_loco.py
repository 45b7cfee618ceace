"""`ragtiller tune --datasets`: leave-one-collection-out selection, and its shipping rule."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from fixtures.eval_cli import main

from ragtiller.core.run_manifest import RunManifest
from ragtiller.eval import EvalError, EvalRun, QueryResult, load_beir
from ragtiller.eval.datasets import EvalDataset
from ragtiller.eval.tuning import Collection, LocoResult, loco_tune
from ragtiller.eval.variants import with_overrides
from ragtiller.ingest import ingest
from ragtiller.models import HashingEmbedder
from ragtiller.policies import RetrievalPolicy, load_policy

TINY = Path(__file__).parent / "data" / "tiny_beir"
DEFAULT_YAML = Path(__file__).parents[1] / "ragtiller" / "policies" / "shipped" / "default.yaml"
# tiny_beir rankings: every judged query perfect, or nothing found.
BEST = {"q1": ["d1", "d2"], "q2": ["d3"], "q3": ["d5", "d4"], "q4": [], "q5": ["d7"]}
SPACE = {"fusion.method": ["zscore", "minmax"]}  # the base fuses with rrf


# --- the selection rule, on runs whose quality each test decides --------------------------------

Good = Callable[[str, str, bool], bool]
"""(collection, fusion method, held-out half?) -> whether that policy ranks perfectly there."""


def collection(name: str, good: Good) -> Collection:
    dataset = load_beir(TINY)
    tune_half, held_out = dataset.split_halves(seed=0)

    def evaluate(policy: RetrievalPolicy, half: EvalDataset) -> EvalRun:
        perfect = good(name, policy.fusion.method, half is held_out)
        results = {
            qid: QueryResult(
                qid,
                tuple(BEST[qid]) if perfect else (),
                RunManifest(
                    run_id=qid,
                    created_at="2026-01-01T00:00:00Z",
                    policy_id=policy.policy_id,
                    policy_version=policy.version,
                    query_type="factual_lookup",
                    latency_ms={"total": 1.0},
                ),
            )
            for qid in half.queries
        }
        return EvalRun(policy.policy_id, policy.version, half.sha256, results)

    return Collection(name, tune_half, held_out, evaluate)


def base() -> RetrievalPolicy:
    """The default with rank fusion, so neither point of SPACE is the base itself."""
    return with_overrides(load_policy(), {"fusion.method": "rrf"})


def select(good: Good, names: tuple[str, ...] = ("a", "b", "c")) -> LocoResult:
    return loco_tune(base(), SPACE, [collection(n, good) for n in names], n_resamples=200)


def test_a_point_every_fold_chooses_and_every_held_back_collection_lifts_ships() -> None:
    result = select(lambda name, method, held: method == "minmax")
    assert result.points == ({}, {"fusion.method": "zscore"}, {"fusion.method": "minmax"})
    assert result.scores == {"a": (0.0, 0.0, 1.0), "b": (0.0, 0.0, 1.0), "c": (0.0, 0.0, 1.0)}
    assert [(f.held_back, f.choice) for f in result.folds] == [("a", 2), ("b", 2), ("c", 2)]
    assert all(f.confirmed for f in result.folds)
    assert result.candidate is not None and result.candidate.fusion.method == "minmax"
    assert result.candidate.version == f"{base().version}+loco-seed0"
    assert result.verdict.startswith("shipped: {'fusion.method': 'minmax'}, rejected by no")


def test_folds_that_choose_differently_ship_nothing() -> None:
    # Holding a back leaves b and c, both for minmax; holding b (or c) back leaves one vote
    # each, a tie that the earlier point, zscore, wins.
    fans = {"a": "zscore", "b": "minmax", "c": "minmax"}
    result = select(lambda name, method, held: method == fans[name])
    assert [f.choice for f in result.folds] == [2, 1, 1]
    assert result.judged is None and result.candidate is None
    assert all(f.judgement is None for f in result.folds)  # nothing single to judge
    assert result.verdict.startswith("NOT shipped: the folds chose different points")


def test_a_held_back_collection_that_rejects_the_choice_stops_it() -> None:
    # Everyone prefers minmax on the tune halves, but on c's held-out half it finds nothing
    # where the base ranks perfectly.
    result = select(lambda name, method, held: (method == "minmax") != (name == "c" and held))
    assert [f.choice for f in result.folds] == [2, 2, 2]
    assert [f.rejected for f in result.folds] == [False, False, True]
    assert [f.confirmed for f in result.folds] == [True, True, False]
    assert result.judged is not None and result.candidate is None
    assert result.verdict == "NOT shipped: rejected by held-out c"


def good_where_it_acts(name: str, method: str, held: bool) -> bool:
    """minmax helps collection a; on b and c every policy scores the same (perfect)."""
    return method == "minmax" or name != "a"


def test_a_collection_the_point_cannot_change_does_not_reject_it() -> None:
    # Folds holding b or c back see a's gain and choose minmax; the fold holding a back sees
    # only ties and keeps the base. b's and c's held-out halves show no change: no rejection.
    result = select(good_where_it_acts)
    assert [f.choice for f in result.folds] == [0, 2, 2]
    assert [f.rejected for f in result.folds] == [False, False, False]
    assert [f.confirmed for f in result.folds] == [True, False, False]  # a's lift alone
    assert result.candidate is not None and result.candidate.fusion.method == "minmax"
    assert (
        result.verdict
        == "shipped: {'fusion.method': 'minmax'}, rejected by no collection, lift on a"
    )


def test_a_collection_whose_fold_kept_the_base_still_judges_the_candidate() -> None:
    # As above, but on a's held-out half minmax finds nothing and the base everything: a's
    # fold never chose it, and a rejects it all the same.
    result = select(lambda name, method, held: good_where_it_acts(name, method, held) != (
        name == "a" and held))  # fmt: skip
    assert [f.choice for f in result.folds] == [0, 2, 2]
    assert result.folds[0].rejected
    assert result.candidate is None
    assert result.verdict == "NOT shipped: rejected by held-out a"


def test_a_candidate_no_collection_lifts_does_not_ship() -> None:
    # minmax wins a's tune half only; every held-out half is the same for every policy.
    result = select(lambda name, method, held: method == "minmax" or name != "a" or held)
    assert [f.choice for f in result.folds] == [0, 2, 2]
    assert not any(f.rejected or f.confirmed for f in result.folds)
    assert result.candidate is None
    assert result.verdict == "NOT shipped: no collection shows a lift"


def test_a_space_that_cannot_beat_the_base_keeps_it() -> None:
    result = select(lambda name, method, held: True)  # all points tie: the base wins ties
    assert {f.choice for f in result.folds} == {0}
    assert all(f.judgement is None and not f.confirmed for f in result.folds)  # no runs
    assert result.candidate is None and result.verdict == "NOT shipped: every fold kept the base"


def test_fewer_than_two_or_repeated_collections_are_refused() -> None:
    with pytest.raises(EvalError, match="at least two collections"):
        select(lambda *_: True, names=("a",))
    with pytest.raises(EvalError, match="collection names repeat"):
        select(lambda *_: True, names=("a", "a"))


# --- the command, on real graphs over two tiny collections --------------------------------------

TOPICS = {
    "alpha": [
        ("boundary layer transition", "laminar flow over a flat plate"),
        ("panel flutter", "aeroelastic instability of thin plates"),
        ("shock tube", "gas measurements behind a moving shock"),
        ("rocket nozzle", "exit velocity of the exhaust jet"),
    ],
    "beta": [
        ("clove harbour", "Zanzibar ships carry spices"),
        ("monsoon winds", "dhows sail with the seasonal wind"),
        ("coral reef", "fish shelter among the reef corals"),
        ("tidal flats", "mangroves grow where the tide retreats"),
    ],
}


def beir(root: Path, name: str) -> Path:
    """Four queries, each judged relevant to two documents that share its words."""
    folder = root / name
    (folder / "qrels").mkdir(parents=True)
    corpus, queries, qrels = [], [], ["query-id\tcorpus-id\tscore"]
    for n, (topic, detail) in enumerate(TOPICS[name]):
        for m in range(2):
            text = f"{topic} {detail}. Study {m} of the {topic}."
            corpus.append(json.dumps({"_id": f"d{n}{m}", "title": topic, "text": text}))
            qrels.append(f"q{n}\td{n}{m}\t1")
        queries.append(json.dumps({"_id": f"q{n}", "text": f"what is known about {topic}"}))
    (folder / "corpus.jsonl").write_text("\n".join(corpus) + "\n", encoding="utf-8")
    (folder / "queries.jsonl").write_text("\n".join(queries) + "\n", encoding="utf-8")
    (folder / "qrels" / "test.tsv").write_text("\n".join(qrels) + "\n", encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def dataset_list(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("loco")
    entries = []
    for name in TOPICS:
        folder = beir(root / "data", name)
        ingest([folder / "corpus.jsonl"], root / "idx" / name, embedder=HashingEmbedder(dim=256),
               progress=False)  # fmt: skip
        entries.append({"dataset": f"data/{name}", "index": f"idx/{name}"})
    listing = root / "datasets.yaml"
    listing.write_text(yaml.safe_dump(entries), encoding="utf-8")
    return listing


def one_result_base(path: Path) -> Path:
    data = yaml.safe_load(DEFAULT_YAML.read_text("utf-8"))
    for route in data["routes"].values():
        route["top_k"] = 1
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def test_tune_over_a_list_of_datasets_ships_a_point_every_fold_confirms(
    dataset_list: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # One result per query finds one of two relevant documents; five find both, on every query
    # of both collections, so every fold chooses five and every held-out half confirms it.
    space = tmp_path / "space.yaml"
    space.write_text(yaml.safe_dump({f"routes.{r}.top_k": [5] for r in
                                     ("factual_lookup", "exact_lexical_lookup", "synthesis")}))  # fmt: skip
    out = tmp_path / "out"
    argv = [
        "tune",
        "--datasets",
        str(dataset_list),
        "--base",
        str(one_result_base(tmp_path / "b.yaml")),
    ]
    code = main(
        [*argv, "--space", str(space), "--out", str(out), "--resamples", "200", "--no-progress"]
    )
    printed = capsys.readouterr().out
    assert code == 0, printed
    selection = json.loads((out / "selection.json").read_text("utf-8"))
    assert selection["kind"] == "ragtiller.loco-selection"
    assert list(selection["collections"]) == ["alpha", "beta"]
    assert selection["collections"]["alpha"]["top_k"] is None  # neither --top-k nor top_k
    base_row, point_row = (p["tune_half_scores"] for p in selection["points"])
    assert all(point_row[c] > base_row[c] for c in ("alpha", "beta"))
    assert [f["held_back"] for f in selection["folds"]] == ["alpha", "beta"]
    assert all(
        f["lift"] and not f["rejected"] and f["promotion"]["decision"] == "promote"
        for f in selection["folds"]
    )
    assert all(f["promotion"]["lifts"]["all"]["mean"] > 0 for f in selection["folds"])
    assert selection["shipped"] is True
    candidate = load_policy(out / "candidate.yaml")
    assert {r.top_k for r in candidate.routes.values()} == {5}
    assert selection["candidate"]["version"] == candidate.version
    assert "tune-half score per collection (alpha: NDCG@10, beta: NDCG@10)" in printed
    assert printed.splitlines()[-2].startswith("shipped: ")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--index", "x"], "give either --index and --dataset, or --datasets LIST.yaml"),
        ([], "give either --index and --dataset, or --datasets LIST.yaml"),
    ],
)
def test_tune_needs_one_dataset_or_a_list(
    dataset_list: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    extra: list[str],
    message: str,
) -> None:
    space = tmp_path / "space.yaml"
    space.write_text("fusion.method: [zscore]\n")
    argv = ["tune", "--base", "default", "--space", str(space), "--out", str(tmp_path / "o")]
    listing = ["--datasets", str(dataset_list)] if extra else []
    assert main([*argv, *listing, *extra, "--no-progress"]) == 2
    assert capsys.readouterr().err == f"ragtiller tune: error: {message}\n"


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"dataset": "d", "index": "i", "qrels": "x"}, "entry 1: unknown key(s) ['qrels']"),
        (
            {"dataset": "d", "index": "i", "top_k": "10"},
            "entry 1: top_k must be a positive integer",
        ),
        ({"dataset": "d"}, "entry 1: expected a mapping with 'dataset' and 'index'"),
    ],
)
def test_a_bad_dataset_list_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], entry: dict[str, str], message: str
) -> None:
    listing = tmp_path / "list.yaml"
    listing.write_text(yaml.safe_dump([entry]))
    space = tmp_path / "space.yaml"
    space.write_text("fusion.method: [zscore]\n")
    argv = ["tune", "--datasets", str(listing), "--base", "default", "--space", str(space)]
    assert main([*argv, "--out", str(tmp_path / "o"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ragtiller tune: error: dataset list ")
    assert message in err and err.count("\n") == 1
