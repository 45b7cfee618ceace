"""The ``eval``, ``promote`` and ``tune`` command-line commands (argparse), wired in by ``ragtiller.cli.app``."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from langchain_core.embeddings import Embeddings

from ragtiller.errors import RagtillerError
from ragtiller.eval.compare import DEFAULT_RESAMPLES, compare_runs
from ragtiller.eval.coverage import Coverage, check_coverage, index_doc_ids
from ragtiller.eval.dataset_list import read_dataset_list
from ragtiller.eval.datasets import EvalDataset
from ragtiller.eval.fingerprint import dataset_fingerprint, index_fingerprint
from ragtiller.eval.honesty import (
    EVAL_DEADLINE_S,
    Degradation,
    check_degraded,
    deadlines_line,
    degradation,
    depth_line,
    not_searched,
    without_deadlines,
)
from ragtiller.eval.layouts import load_dataset
from ragtiller.eval.loco import Collection, LocoResult, loco_tune
from ragtiller.eval.promotion import decide, decision_artifact, dumps_decision, write_decision
from ragtiller.eval.query_cache import QueryVectorCache
from ragtiller.eval.runner import EvalRun, run_eval
from ragtiller.eval.summary import METRIC_LABELS, primary_metric, summarize
from ragtiller.eval.tables import (
    dataset_line,
    print_decision,
    print_loco_folds,
    print_loco_header,
    print_loco_row,
    print_table,
)
from ragtiller.eval.tuning import Evaluate, TunePoint, dump_policy, load_space, tune, tune_section
from ragtiller.eval.variants import policy_sha256, with_depth
from ragtiller.index import EmbeddedIndex, open_index
from ragtiller.policies import RetrievalPolicy, load_policy

EXIT_PROMOTE, EXIT_REJECT, EXIT_ERROR = 0, 1, 2
_HANDLED = (RagtillerError, OSError, ImportError, ValueError)
"""Errors reported as one line with exit code 2; anything else is a bug and keeps its traceback."""
SELECTION_KIND = "ragtiller.loco-selection"


def add_commands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``eval``, ``promote`` and ``tune``; each sets ``func(args) -> int`` (the exit code).

    Example:
        >>> parser = argparse.ArgumentParser(prog="ragtiller")
        >>> add_commands(parser.add_subparsers(dest="command", required=True))
        >>> args = parser.parse_args(["eval", "--index", "i", "--dataset", "d", "--policy", "p"])
        >>> args.concurrency, args.allow_degraded
        (8, False)
    """
    ev = subparsers.add_parser(
        "eval",
        help="Run a dataset (BEIR or passage QA) through the serving graph; metrics per slice.",
        description="Run every query of a dataset through the graph built from --policy and "
        "--index. A BEIR collection (corpus.jsonl, queries.jsonl, qrels/) gets NDCG@10, MRR@10, "
        "Recall@10/100 over unique documents; a QA collection (docs/, <split>.jsonl with "
        "answers) gets answer hit@1/5/10/20, words per passage and context words per turn. "
        "Both get latency, LLM calls and degraded turns. Exit 0: measured, 2: error (also: "
        "the index holds none of the dataset's documents, or a turn was degraded).",
    )
    ev.add_argument(
        "--policy", default=None, help="Policy YAML file or shipped policy name (default: default)."
    )
    _common(ev)
    ev.add_argument("--json", action="store_true", help="Print the metrics as JSON.")
    ev.set_defaults(func=_eval)

    pr = subparsers.add_parser(
        "promote",
        help="Compare a candidate policy with a baseline and decide promote/reject.",
        description="Evaluate both policies on the same index and dataset, bootstrap the "
        "lift of the primary metric (NDCG@10; answer MRR@10 for a QA dataset) per slice and "
        "apply the candidate's promotion rules. Exit 0: promote, 1: reject, 2: error.",
    )
    pr.add_argument("--candidate", required=True, help="Candidate policy YAML (its rules apply).")
    pr.add_argument("--baseline", required=True, help="Baseline policy YAML or shipped name.")
    _common(pr)
    pr.add_argument("--out", type=Path, help="Write the decision JSON artifact here.")
    pr.add_argument("--json", action="store_true", help="Print the decision artifact as JSON.")
    _bootstrap(pr, "Bootstrap seed (default 0).")
    pr.set_defaults(func=_promote)

    tu = subparsers.add_parser(
        "tune",
        help="Search a small policy space on tune halves; confirm on held-out data.",
        description="One dataset (--index, --dataset): split the queries in two (seeded), "
        "score every point of --space on the tune half, then compare the best point with "
        "--base on the held-out half as `promote` does; writes candidate.yaml and "
        "promotion.json. Several (--datasets LIST.yaml): leave-one-collection-out; for each "
        "collection, choose on the others' tune halves and judge on its held-out half; "
        "the one point other than the base that the folds chose is judged on every held-out "
        "half; candidate.yaml only when none rejects it and one shows a lift; writes "
        "selection.json. Exit 0: confirmed (shipped), 1: not, 2: error.",
    )
    tu.add_argument("--base", required=True, help="Base policy YAML or shipped policy name.")
    tu.add_argument(
        "--space", required=True, type=Path, help="Search space YAML: field -> list of values."
    )
    tu.add_argument("--out", required=True, type=Path, help="Directory for the output files.")
    tu.add_argument(
        "--datasets",
        type=Path,
        default=None,
        help="YAML list of {dataset, index[, split, slices, top_k]}: leave-one-collection-out "
        "over them (instead of --index and --dataset); an entry's top_k overrides --top-k.",
    )
    _common(tu, single=False)
    _bootstrap(tu, "Split and bootstrap seed (default 0).")
    tu.set_defaults(func=_tune)


def _positive(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {value}")
    return value


def _bootstrap(parser: argparse.ArgumentParser, seed_help: str) -> None:
    parser.add_argument("--seed", type=int, default=0, help=seed_help)
    parser.add_argument(
        "--resamples",
        type=int,
        default=DEFAULT_RESAMPLES,
        help=f"Bootstrap resamples (default {DEFAULT_RESAMPLES}).",
    )


def _common(parser: argparse.ArgumentParser, *, single: bool = True) -> None:
    parser.add_argument("--index", required=single, type=Path, help="Index directory.")
    parser.add_argument(
        "--dataset",
        required=single,
        type=Path,
        help="Dataset folder: BEIR (corpus.jsonl, queries.jsonl, qrels/) or passage QA "
        "(docs/, <split>.jsonl); the layout tells which.",
    )
    parser.add_argument(
        "--split",
        default=None,
        help="BEIR: the qrels split (default test); QA: the questions file stem "
        "(default questions, e.g. questions-1000).",
    )
    parser.add_argument(
        "--slices", type=Path, help="query-id -> slice file (.tsv or .json); default: the route."
    )
    parser.add_argument(
        "--concurrency", type=_positive, default=8, help="Turns in flight (default 8)."
    )
    parser.add_argument("--no-progress", action="store_true", help="Hide the progress bar.")
    if single:
        parser.add_argument(
            "--half",
            choices=["tune", "heldout"],
            default=None,
            help="Only this half of a seeded split of the queries (the split `tune` uses).",
        )
        parser.add_argument(
            "--half-seed", type=int, default=0, help="Seed of the --half split (default 0)."
        )
    parser.add_argument(
        "--top-k",
        type=_positive,
        default=None,
        help="Evaluate with every route returning this many results (top_k and max_chunks), "
        "e.g. 100 so Recall@100 is defined, or 20 for hit@20; the policy file is not changed.",
    )
    parser.add_argument(
        "--allow-degraded",
        action="store_true",
        help="Report figures even when some turn was degraded (a stage timed out, failed or "
        "fell back); without it such a run is an error.",
    )


def _dataset(args: argparse.Namespace) -> EvalDataset:
    dataset = load_dataset(args.dataset, split=args.split, slices=args.slices)
    if args.half is None:
        return dataset
    tune_half, held_out = dataset.split_halves(seed=args.half_seed)
    return tune_half if args.half == "tune" else held_out


def _open(path: Path, dataset: EvalDataset) -> tuple[EmbeddedIndex, Coverage]:
    """The index, refused when it holds none of the dataset's documents."""
    index = open_index(path)
    return index, check_coverage(dataset, index_doc_ids(index))


def _fail(command: str, error: BaseException) -> int:
    message = " ".join(line.strip() for line in str(error).splitlines() if line.strip())
    print(f"ragtiller {command}: error: {message or type(error).__name__}", file=sys.stderr)
    return EXIT_ERROR


def _evaluate(
    policy: RetrievalPolicy,
    index: EmbeddedIndex,
    dataset: EvalDataset,
    args: argparse.Namespace,
    embedder: Embeddings | None = None,
) -> EvalRun:
    """One run of ``dataset``: deadlines lifted, ``--top-k`` applied, the index fingerprinted."""
    from ragtiller.graph.builder import build_graph

    policy = _measured(policy, dataset, args)
    # the operator measures the whole index: a dataset's queries name no tenant
    graph = build_graph(
        without_deadlines(policy), index=index, embedder=embedder, require_tenant=False
    )
    run = run_eval(graph, dataset, concurrency=args.concurrency, progress=not args.no_progress)
    return replace(run, index=index_fingerprint(index))


def _measured(
    policy: RetrievalPolicy, dataset: EvalDataset, args: argparse.Namespace
) -> RetrievalPolicy:
    """The policy an eval runs: ``--top-k`` applied (documents: one passage each; QA: the
    policy's passages)."""
    if args.top_k is None:
        return policy
    per_document = None if dataset.kind == "passages" else 1
    return with_depth(policy, args.top_k, per_document=per_document)


def _checked(
    index: EmbeddedIndex, args: argparse.Namespace, embedder: Embeddings | None = None
) -> Evaluate:
    """``_evaluate`` on ``index`` that refuses a degraded run unless ``--allow-degraded``."""

    def evaluate(policy: RetrievalPolicy, dataset: EvalDataset) -> EvalRun:
        run = _evaluate(policy, index, dataset, args, embedder)
        check_degraded(run, allow=args.allow_degraded, what=f"{policy.policy_id} on {dataset.name}")
        return run

    return evaluate


def _eval(args: argparse.Namespace) -> int:
    try:
        policy = load_policy(args.policy)
        dataset = _dataset(args)
        index, coverage = _open(args.index, dataset)
        run = _evaluate(policy, index, dataset, args)
    except _HANDLED as e:
        return _fail("eval", e)
    metrics = summarize(run, dataset)
    degraded = degradation(run)
    skipped = not_searched(run)
    depth = depth_line(policy, _measured(policy, dataset, args))
    if args.json:
        payload = {
            "policy": {"policy_id": policy.policy_id, "version": policy.version},
            "dataset": {
                **_dataset_json(dataset),
                "coverage": {"found": coverage.found, "total": coverage.total},
            },
            "deadlines": {
                "lifted_to_s": EVAL_DEADLINE_S,
                "policy": policy.deadlines.model_dump(),
            },
            "degraded": degraded.to_json(),
            "not_searched": skipped.to_json(),
            "depth": depth,
            "index": run.index,
            "metrics": {name: m.to_json() for name, m in metrics.items()},
        }
        print(json.dumps(payload, indent=2, sort_keys=True, allow_nan=False))
    else:
        print(f"policy {policy.policy_id} @ {policy.version} · {dataset_line(dataset)}")
        print(f"{coverage.line(dataset)} · {deadlines_line(policy)}")
        if depth is not None:
            print(depth)
        print_table(metrics, dataset.kind, sys.stdout)
        if skipped.turns:
            print(skipped.summary())
        print(degraded.summary())
    try:
        check_degraded(run, allow=args.allow_degraded, what=f"{policy.policy_id} on {dataset.name}")
    except _HANDLED as e:
        return _fail("eval", e)
    return EXIT_PROMOTE


def _promote(args: argparse.Namespace) -> int:
    try:
        candidate, baseline = load_policy(args.candidate), load_policy(args.baseline)
        dataset = _dataset(args)
        index, _ = _open(args.index, dataset)
        evaluate = _checked(index, args, QueryVectorCache(index.embedder))
        cand_run, base_run = evaluate(candidate, dataset), evaluate(baseline, dataset)
        comparison = compare_runs(
            cand_run, base_run, dataset, seed=args.seed, n_resamples=args.resamples
        )
        decision = decide(candidate.promotion, comparison)
        artifact = decision_artifact(
            candidate,
            baseline,
            dataset,
            comparison,
            decision,
            index=cand_run.index,
            degraded=_degraded(cand_run, base_run),
        )
        if args.out is not None:
            write_decision(artifact, args.out)
    except _HANDLED as e:
        return _fail("promote", e)
    if args.json:
        sys.stdout.write(dumps_decision(artifact))
    else:
        print_decision(candidate, baseline, dataset, comparison, decision, args.out)
    return EXIT_PROMOTE if decision.decision == "promote" else EXIT_REJECT


def _degraded(candidate: EvalRun, baseline: EvalRun) -> dict[str, Degradation]:
    return {"candidate": degradation(candidate), "baseline": degradation(baseline)}


def _quiet(args: argparse.Namespace) -> argparse.Namespace:
    return argparse.Namespace(**{**vars(args), "no_progress": True})


def _tune(args: argparse.Namespace) -> int:
    single = args.index is not None or args.dataset is not None
    if single == (args.datasets is not None):
        message = "give either --index and --dataset, or --datasets LIST.yaml"
        return _fail("tune", ValueError(message))
    if single and (args.index is None or args.dataset is None):
        return _fail("tune", ValueError("--index and --dataset go together"))
    return _tune_one(args) if single else _tune_many(args)


def _tune_one(args: argparse.Namespace) -> int:
    try:
        base = load_policy(args.base)
        space = load_space(args.space)
        dataset = load_dataset(args.dataset, split=args.split, slices=args.slices)
        tune_half, held_out = dataset.split_halves(seed=args.seed)
        index, coverage = _open(args.index, dataset)
        evaluate = _checked(index, _quiet(args), QueryVectorCache(index.embedder))
        label = METRIC_LABELS[primary_metric(dataset)]
        print(
            f"tune {base.policy_id} @ {base.version} · {dataset_line(dataset)} · halves "
            f"{len(tune_half.queries)}/{len(held_out.queries)} (seed {args.seed})"
        )
        print(f"{coverage.line(dataset)} · {deadlines_line(base)}")
        print(f"{'tune ' + label:>12}  overrides")

        def show(point: TunePoint) -> None:
            print(f"{point.score:>12.4f}  {dict(point.overrides) or '(base)'}", flush=True)

        result = tune(
            base,
            space,
            tune_half,
            held_out,
            evaluate,
            seed=args.seed,
            n_resamples=args.resamples,
            on_point=show,
        )
        confirmation = result.confirmation
        artifact = decision_artifact(
            result.candidate,
            base,
            held_out,
            confirmation.comparison,
            confirmation.decision,
            index=index_fingerprint(index),
            degraded=_degraded(confirmation.candidate_run, confirmation.baseline_run),
        )
        artifact["tune"] = tune_section(result, seed=args.seed, space=space)
        candidate_file = args.out / "candidate.yaml"
        dump_policy(
            result.candidate,
            candidate_file,
            header=f"`ragtiller tune` candidate: {base.policy_id} @ {base.version} with "
            f"{dict(result.best.overrides)}\n(chosen on the tune half of {dataset.name}, seed "
            f"{args.seed}; held-out evidence: promotion.json)",
        )
        write_decision(artifact, args.out / "promotion.json")
    except _HANDLED as e:
        return _fail("tune", e)
    print(f"\nbest on the tune half: {dict(result.best.overrides) or '(the base itself)'}")
    print("held-out half:")
    print_decision(
        result.candidate, base, held_out, confirmation.comparison, confirmation.decision,
        args.out / "promotion.json",
    )  # fmt: skip
    verdict = "confirmed" if result.confirmed else "NOT confirmed"
    print(f"{verdict} on the held-out half; candidate policy: {candidate_file}")
    return EXIT_PROMOTE if result.confirmed else EXIT_REJECT


def _tune_many(args: argparse.Namespace) -> int:
    try:
        base = load_policy(args.base)
        space = load_space(args.space)
        quiet = _quiet(args)
        collections: list[Collection] = []
        described: list[dict[str, Any]] = []
        for entry in read_dataset_list(args.datasets):
            dataset = load_dataset(entry.dataset, split=entry.split, slices=entry.slices)
            index, coverage = _open(entry.index, dataset)
            tune_half, held_out = dataset.split_halves(seed=args.seed)
            depth = argparse.Namespace(**{**vars(quiet), "top_k": entry.top_k or args.top_k})
            evaluate = _checked(index, depth, QueryVectorCache(index.embedder))
            collections.append(Collection(dataset.name, tune_half, held_out, evaluate))
            described.append(
                {
                    "dataset": dataset_fingerprint(dataset),
                    "index": index_fingerprint(index),
                    "metric": primary_metric(dataset),
                    "top_k": entry.top_k or args.top_k,
                    "halves": [len(tune_half.queries), len(held_out.queries)],
                }
            )
            print(f"{dataset.name}: {dataset_line(dataset)} · {coverage.line(dataset)}")
        print(
            f"tune {base.policy_id} @ {base.version} · leave-one-collection-out over "
            f"{len(collections)} collections (seed {args.seed}) · {deadlines_line(base)}"
        )
        print_loco_header([c.name for c in collections], [d["metric"] for d in described])
        result = loco_tune(
            base,
            space,
            collections,
            seed=args.seed,
            n_resamples=args.resamples,
            on_row=print_loco_row,
        )
        selection = _selection(base, space, args.seed, collections, described, result)
        args.out.mkdir(parents=True, exist_ok=True)
        write_decision(selection, args.out / "selection.json")
        if result.candidate is not None:
            dump_policy(
                result.candidate,
                args.out / "candidate.yaml",
                header=f"`ragtiller tune --datasets` candidate: {base.policy_id} @ "
                f"{base.version}\n{result.verdict}; evidence: selection.json",
            )
    except _HANDLED as e:
        return _fail("tune", e)
    print_loco_folds(result)
    print(f"selection written to {args.out / 'selection.json'}")
    return EXIT_PROMOTE if result.shipped else EXIT_REJECT


def _selection(
    base: RetrievalPolicy,
    space: dict[str, list[Any]],
    seed: int,
    collections: list[Collection],
    described: list[dict[str, Any]],
    result: LocoResult,
) -> dict[str, Any]:
    """The selection artifact: collections, every point's scores, every fold's evidence."""
    folds = []
    for fold, held in zip(result.folds, collections, strict=True):
        c = fold.judgement
        promotion = None
        if c is not None and result.judged is not None:
            promotion = decision_artifact(
                result.judged,
                base,
                held.held_out,
                c.comparison,
                c.decision,
                index=c.candidate_run.index,
                degraded=_degraded(c.candidate_run, c.baseline_run),
            )
        folds.append(
            {
                "held_back": fold.held_back,
                "chosen": dict(result.points[fold.choice]),
                "others_mean_score": round(fold.selection_score, 6),
                "rejected": fold.rejected,
                "lift": fold.confirmed,
                "promotion": promotion,
            }
        )
    return {
        "kind": SELECTION_KIND,
        "base": {
            "policy_id": base.policy_id,
            "version": base.version,
            "sha256": policy_sha256(base),
        },
        "seed": seed,
        "space": space,
        "eval_deadlines_s": EVAL_DEADLINE_S,
        "collections": {c.name: d for c, d in zip(collections, described, strict=True)},
        "points": [
            {
                "overrides": dict(overrides),
                "tune_half_scores": {
                    name: round(scores[i], 6) for name, scores in result.scores.items()
                },
            }
            for i, overrides in enumerate(result.points)
        ],
        "folds": folds,
        "shipped": result.shipped,
        "verdict": result.verdict,
        "candidate": None
        if result.candidate is None
        else {
            "policy_id": result.candidate.policy_id,
            "version": result.candidate.version,
            "sha256": policy_sha256(result.candidate),
        },
    }


def _dataset_json(dataset: EvalDataset) -> dict[str, Any]:
    return {
        "name": dataset.name,
        "kind": dataset.kind,
        "split": dataset.split,
        "sha256": dataset.sha256,
        "n_queries": len(dataset.queries),
        "slices_from": "labels" if dataset.labels is not None else "route",
    }
