"""``eval``, ``promote`` and ``tune``: their errors are one line and exit 2 (docs/eval.md)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from ragtiller.errors import RagtillerError
from ragtiller.eval import honesty, tables, tuning
from ragtiller.eval.datasets import EvalDataset, load_dataset, read_dataset_list
from ragtiller.eval.promotion import DEFAULT_RESAMPLES, dumps_decision, judge, write_decision
from ragtiller.eval.runner import Evaluate, QueryVectorCache, run_eval
from ragtiller.eval.summary import METRIC_LABELS, primary_metric, summarize
from ragtiller.eval.variants import with_depth
from ragtiller.index import EmbeddedIndex, open_index
from ragtiller.policies import RetrievalPolicy, load_policy

EXIT_PROMOTE, EXIT_REJECT, EXIT_ERROR = 0, 1, 2
_HANDLED = (RagtillerError, OSError, ImportError, ValueError)  # else a bug: traceback kept
POLICY_HELP = "Policy YAML file or shipped policy name (default: default)."


def add_commands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``eval``, ``promote`` and ``tune``; each sets ``func(args) -> int`` (the exit code)."""
    ev = subparsers.add_parser(
        "eval",
        help="Run a dataset through the serving graph; metrics per slice (docs/eval.md).",
        description="Exit 0: measured, 2: error (also: no shared documents, or a degraded turn).",
    )
    ev.add_argument("--policy", default=None, help=POLICY_HELP)
    _common(ev)
    ev.add_argument("--json", action="store_true", help="Print the metrics as JSON.")
    ev.set_defaults(func=_handled("eval", _eval))

    pr = subparsers.add_parser(
        "promote",
        help="Compare a candidate policy with a baseline; promote or reject (docs/eval.md).",
        description="Exit 0: promote, 1: reject, 2: error.",
    )
    pr.add_argument("--candidate", required=True, help="Candidate policy YAML (its rules apply).")
    pr.add_argument("--baseline", required=True, help="Baseline policy YAML or shipped name.")
    _common(pr)
    pr.add_argument("--out", type=Path, help="Write the decision JSON artifact here.")
    pr.add_argument("--json", action="store_true", help="Print the decision artifact as JSON.")
    _bootstrap(pr, "Bootstrap seed (default 0).")
    pr.set_defaults(func=_handled("promote", _promote))

    tu = subparsers.add_parser(
        "tune",
        help="Search a policy space on tune halves; confirm on held-out data (docs/eval.md).",
        description="Exit 0: confirmed (shipped), 1: not, 2: error.",
    )
    add = tu.add_argument
    add("--base", required=True, help="Base policy YAML or shipped policy name.")
    add("--space", required=True, type=Path, help="Search space YAML: field -> list of values.")
    add("--out", required=True, type=Path, help="Directory for the output files.")
    add("--datasets", type=Path, help="Instead of --index/--dataset: leave-one-collection-out.")
    _common(tu, single=False)
    _bootstrap(tu, "Split and bootstrap seed (default 0).")
    tu.set_defaults(func=_handled("tune", _tune))


def _positive(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {value}")
    return value


def _bootstrap(parser: argparse.ArgumentParser, seed_help: str) -> None:
    parser.add_argument("--seed", type=int, default=0, help=seed_help)
    resamples = f"Bootstrap resamples (default {DEFAULT_RESAMPLES})."
    parser.add_argument("--resamples", type=int, default=DEFAULT_RESAMPLES, help=resamples)


def _common(parser: argparse.ArgumentParser, *, single: bool = True) -> None:
    add = parser.add_argument
    add("--index", required=single, type=Path, help="Index directory.")
    add("--dataset", required=single, type=Path, help="Dataset folder: BEIR or passage QA.")
    add("--split", help="Qrels split (default test) or QA questions file stem (default questions).")
    add("--slices", type=Path, help="query-id -> slice file (.tsv or .json); default: the route.")
    add("--concurrency", type=_positive, default=8, help="Turns in flight (default 8).")
    add("--no-progress", action="store_true", help="Hide the progress bar.")
    if single:
        add("--half", choices=["tune", "heldout"], help="Only this half of the split `tune` uses.")
        add("--half-seed", type=int, default=0, help="Seed of the --half split (default 0).")
    add("--top-k", type=_positive, help="Every route returns this many results.")
    add("--allow-degraded", action="store_true", help="Report figures of degraded turns too.")


def _handled(
    command: str, run: Callable[[argparse.Namespace], int]
) -> Callable[[argparse.Namespace], int]:
    def func(args: argparse.Namespace) -> int:
        try:
            return run(args)
        except _HANDLED as e:
            message = " ".join(line.strip() for line in str(e).splitlines() if line.strip())
            print(f"ragtiller {command}: error: {message or type(e).__name__}", file=sys.stderr)
            return EXIT_ERROR

    return func


def _open(path: Path, dataset: EvalDataset) -> tuple[EmbeddedIndex, honesty.Coverage]:
    """The index, refused when it holds none of the dataset's documents."""
    index = open_index(path)
    return index, honesty.check_coverage(dataset, honesty.index_doc_ids(index))


def _measured(policy: RetrievalPolicy, dataset: EvalDataset, top_k: int | None) -> RetrievalPolicy:
    """``--top-k`` applied (documents: one passage each; QA: the policy's passages)."""
    if top_k is None:
        return policy
    return with_depth(policy, top_k, per_document=None if dataset.kind == "passages" else 1)


def _evaluator(
    index: EmbeddedIndex,
    args: argparse.Namespace,
    *,
    top_k: int | None,
    progress: bool = False,
    check: bool = True,
) -> Evaluate:
    """Runs on ``index``, deadlines lifted, a degraded run refused when ``check``; query vectors
    are computed once for the runs of a comparison or a search."""
    from ragtiller.graph.builder import build_graph

    embedder = QueryVectorCache(index.embedder) if check else None

    def evaluate(policy: RetrievalPolicy, dataset: EvalDataset) -> Any:
        measured = honesty.without_deadlines(_measured(policy, dataset, top_k))
        # the operator measures the whole index: a dataset's queries name no tenant
        graph = build_graph(measured, index=index, embedder=embedder, require_tenant=False)
        run = run_eval(graph, dataset, concurrency=args.concurrency, progress=progress)
        if check:
            what = f"{policy.policy_id} on {dataset.name}"
            honesty.check_degraded(run, allow=args.allow_degraded, what=what)
        return replace(run, index=honesty.index_fingerprint(index))

    return evaluate


def _dataset(args: argparse.Namespace) -> EvalDataset:
    dataset = load_dataset(args.dataset, split=args.split, slices=args.slices)
    if args.half is None:
        return dataset
    tune_half, held_out = dataset.split_halves(seed=args.half_seed)
    return tune_half if args.half == "tune" else held_out


def _eval(args: argparse.Namespace) -> int:
    policy = load_policy(args.policy)
    dataset = _dataset(args)
    index, coverage = _open(args.index, dataset)
    progress = not args.no_progress
    run = _evaluator(index, args, top_k=args.top_k, progress=progress, check=False)(policy, dataset)
    metrics = summarize(run, dataset)
    degraded, skipped = honesty.degradation(run), honesty.not_searched(run)
    depth = honesty.depth_line(policy, _measured(policy, dataset, args.top_k))
    if args.json:
        slices_from = "labels" if dataset.labels is not None else "route"
        payload = {
            "policy": {"policy_id": policy.policy_id, "version": policy.version},
            "dataset": {
                **honesty.dataset_fingerprint(dataset, files=False),
                "slices_from": slices_from,
                "coverage": {"found": coverage.found, "total": coverage.total},
            },
            "deadlines": {
                "lifted_to_s": honesty.EVAL_DEADLINE_S,
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
        print(f"policy {policy.policy_id} @ {policy.version} · {tables.dataset_line(dataset)}")
        print(f"{coverage.line(dataset)} · {honesty.deadlines_line(policy)}")
        if depth is not None:
            print(depth)
        tables.print_table(metrics, dataset.kind, sys.stdout)
        if skipped.turns:
            print(skipped.summary())
        print(degraded.summary())
    honesty.check_degraded(
        run, allow=args.allow_degraded, what=f"{policy.policy_id} on {dataset.name}"
    )
    return EXIT_PROMOTE


def _promote(args: argparse.Namespace) -> int:
    candidate, baseline = load_policy(args.candidate), load_policy(args.baseline)
    dataset = _dataset(args)
    index, _ = _open(args.index, dataset)
    evaluate = _evaluator(index, args, top_k=args.top_k, progress=not args.no_progress)
    judged = judge(
        candidate, baseline, dataset, evaluate, seed=args.seed, n_resamples=args.resamples
    )
    artifact = judged.artifact(candidate, baseline)
    if args.out is not None:
        write_decision(artifact, args.out)
    if args.json:
        sys.stdout.write(dumps_decision(artifact))
    else:
        tables.print_decision(candidate, baseline, judged, args.out)
    return EXIT_PROMOTE if judged.promoted else EXIT_REJECT


def _collection(
    dataset: EvalDataset, index_path: Path, args: argparse.Namespace, top_k: int | None
) -> tuple[tuning.Collection, honesty.Coverage, EmbeddedIndex]:
    index, coverage = _open(index_path, dataset)
    tune_half, held_out = dataset.split_halves(seed=args.seed)
    evaluate = _evaluator(index, args, top_k=top_k)
    return tuning.Collection(dataset.name, tune_half, held_out, evaluate), coverage, index


def _tune(args: argparse.Namespace) -> int:
    single = args.index is not None or args.dataset is not None
    if single == (args.datasets is not None):
        raise ValueError("give either --index and --dataset, or --datasets LIST.yaml")
    if single and (args.index is None or args.dataset is None):
        raise ValueError("--index and --dataset go together")
    base, space = load_policy(args.base), tuning.load_space(args.space)
    if not single:
        return _tune_many(args, base, space)
    dataset = load_dataset(args.dataset, split=args.split, slices=args.slices)
    collection, coverage, _ = _collection(dataset, args.index, args, args.top_k)
    held_out = collection.held_out
    print(
        f"tune {base.policy_id} @ {base.version} · {tables.dataset_line(dataset)} · halves "
        f"{len(collection.tune_half.queries)}/{len(held_out.queries)} (seed {args.seed})"
    )
    print(f"{coverage.line(dataset)} · {honesty.deadlines_line(base)}")
    print(f"{'tune ' + METRIC_LABELS[primary_metric(dataset)]:>12}  overrides")
    result = tuning.tune(
        base, space, collection, seed=args.seed, n_resamples=args.resamples, on_row=tables.print_row
    )
    confirmation, out = result.confirmation, args.out / "promotion.json"
    best = result.points[result.best]
    artifact = confirmation.artifact(result.candidate, base)
    artifact["tune"] = tuning.tune_section(result, seed=args.seed, space=space)
    tuning.dump_policy(
        result.candidate,
        args.out / "candidate.yaml",
        header=f"`ragtiller tune` candidate: {base.policy_id} @ {base.version} with "
        f"{dict(best)}\n(chosen on the tune half of {dataset.name}, seed "
        f"{args.seed}; held-out evidence: promotion.json)",
    )
    write_decision(artifact, out)
    print(f"\nbest on the tune half: {dict(best) or '(the base itself)'}")
    print("held-out half:")
    tables.print_decision(result.candidate, base, confirmation, out)
    verdict = "confirmed" if confirmation.confirmed else "NOT confirmed"
    print(f"{verdict} on the held-out half; candidate policy: {args.out / 'candidate.yaml'}")
    return EXIT_PROMOTE if confirmation.confirmed else EXIT_REJECT


def _tune_many(args: argparse.Namespace, base: RetrievalPolicy, space: dict[str, list[Any]]) -> int:
    collections: list[tuning.Collection] = []
    described: list[dict[str, Any]] = []
    for entry in read_dataset_list(args.datasets):
        dataset = load_dataset(entry.dataset, split=entry.split, slices=entry.slices)
        top_k = entry.top_k or args.top_k
        collection, coverage, index = _collection(dataset, entry.index, args, top_k)
        collections.append(collection)
        described.append(
            {
                "dataset": honesty.dataset_fingerprint(dataset),
                "index": honesty.index_fingerprint(index),
                "metric": primary_metric(dataset),
                "top_k": top_k,
                "halves": [len(collection.tune_half.queries), len(collection.held_out.queries)],
            }
        )
        print(f"{dataset.name}: {tables.dataset_line(dataset)} · {coverage.line(dataset)}")
    print(
        f"tune {base.policy_id} @ {base.version} · leave-one-collection-out over "
        f"{len(collections)} collections (seed {args.seed}) · {honesty.deadlines_line(base)}"
    )
    tables.print_loco_header([c.name for c in collections], [d["metric"] for d in described])
    result = tuning.loco_tune(
        base,
        space,
        collections,
        seed=args.seed,
        n_resamples=args.resamples,
        on_row=tables.print_row,
    )
    named = {c.name: d for c, d in zip(collections, described, strict=True)}
    selection = tuning.selection_artifact(base, space, args.seed, named, result)
    write_decision(selection, args.out / "selection.json")
    if result.candidate is not None:
        tuning.dump_policy(
            result.candidate,
            args.out / "candidate.yaml",
            header=f"`ragtiller tune --datasets` candidate: {base.policy_id} @ "
            f"{base.version}\n{result.verdict}; evidence: selection.json",
        )
    tables.print_loco_folds(result)
    print(f"selection written to {args.out / 'selection.json'}")
    return EXIT_PROMOTE if result.candidate is not None else EXIT_REJECT
