"""The ``eval``, ``promote`` and ``tune`` command-line commands (argparse), wired in by ``ragtiller.cli``."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, TextIO

from langchain_core.embeddings import Embeddings

from ragtiller.errors import RagtillerError
from ragtiller.eval.compare import DEFAULT_RESAMPLES, Comparison, compare_runs
from ragtiller.eval.datasets import EvalDataset, load_beir
from ragtiller.eval.fingerprint import index_fingerprint
from ragtiller.eval.promotion import (
    PromotionDecision,
    decide,
    decision_artifact,
    dumps_decision,
    write_decision,
)
from ragtiller.eval.query_cache import QueryVectorCache
from ragtiller.eval.report import TOTAL, SliceMetrics, summarize
from ragtiller.eval.runner import EvalRun, run_eval
from ragtiller.eval.tuning import TunePoint, dump_policy, load_space, tune, tune_section
from ragtiller.eval.variants import with_depth
from ragtiller.index import EmbeddedIndex, open_index
from ragtiller.policies import RetrievalPolicy, load_policy

EXIT_PROMOTE, EXIT_REJECT, EXIT_ERROR = 0, 1, 2
_HANDLED = (RagtillerError, OSError, ImportError, ValueError)
"""Errors reported as one line with exit code 2; anything else is a bug and keeps its traceback."""


def add_commands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``eval``, ``promote`` and ``tune``; each sets ``func(args) -> int`` (the exit code).

    Example:
        >>> parser = argparse.ArgumentParser(prog="ragtiller")
        >>> add_commands(parser.add_subparsers(dest="command", required=True))
        >>> args = parser.parse_args(["eval", "--index", "i", "--dataset", "d", "--policy", "p"])
        >>> args.concurrency
        8
    """
    ev = subparsers.add_parser(
        "eval",
        help="Run a BEIR dataset through the serving graph and report metrics per slice.",
        description="Run every query of a BEIR split through the graph built from --policy "
        "and --index; print NDCG@10, MRR@10, Recall@10/100, latency and LLM calls per slice.",
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
        "NDCG@10 lift per slice and apply the candidate's promotion rules. "
        "Exit 0: promote, 1: reject, 2: error.",
    )
    pr.add_argument("--candidate", required=True, help="Candidate policy YAML (its rules apply).")
    pr.add_argument("--baseline", required=True, help="Baseline policy YAML or shipped name.")
    _common(pr)
    pr.add_argument("--out", type=Path, help="Write the decision JSON artifact here.")
    pr.add_argument("--json", action="store_true", help="Print the decision artifact as JSON.")
    pr.add_argument("--seed", type=int, default=0, help="Bootstrap seed (default 0).")
    pr.add_argument(
        "--resamples",
        type=int,
        default=DEFAULT_RESAMPLES,
        help=f"Bootstrap resamples (default {DEFAULT_RESAMPLES}).",
    )
    pr.set_defaults(func=_promote)

    tu = subparsers.add_parser(
        "tune",
        help="Search a small policy space on half the queries; confirm the best on the other half.",
        description="Split the queries in two (seeded), score every point of --space on the "
        "tune half, then compare the best point with --base on the held-out half as `promote` "
        "does. Writes the candidate policy and the promotion artifact into --out. "
        "Exit 0: confirmed on the held-out half, 1: not confirmed, 2: error.",
    )
    tu.add_argument("--base", required=True, help="Base policy YAML or shipped policy name.")
    tu.add_argument(
        "--space", required=True, type=Path, help="Search space YAML: field -> list of values."
    )
    tu.add_argument("--out", required=True, type=Path, help="Directory for the two output files.")
    _common(tu)
    tu.add_argument("--seed", type=int, default=0, help="Split and bootstrap seed (default 0).")
    tu.add_argument(
        "--resamples",
        type=int,
        default=DEFAULT_RESAMPLES,
        help=f"Bootstrap resamples (default {DEFAULT_RESAMPLES}).",
    )
    tu.set_defaults(func=_tune)


def _positive(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {value}")
    return value


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--index", required=True, type=Path, help="Index directory.")
    parser.add_argument("--dataset", required=True, type=Path, help="BEIR dataset directory.")
    parser.add_argument("--split", default="test", help="qrels split (default: test).")
    parser.add_argument(
        "--slices", type=Path, help="query-id -> slice file (.tsv or .json); default: the route."
    )
    parser.add_argument(
        "--concurrency", type=_positive, default=8, help="Turns in flight (default 8)."
    )
    parser.add_argument("--no-progress", action="store_true", help="Hide the progress bar.")
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
        "e.g. 100 so Recall@100 is defined; the policy file is not changed.",
    )


def _dataset(args: argparse.Namespace) -> EvalDataset:
    dataset = load_beir(args.dataset, split=args.split, slices=args.slices)
    if args.half is None:
        return dataset
    tune_half, held_out = dataset.split_halves(seed=args.half_seed)
    return tune_half if args.half == "tune" else held_out


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
    from ragtiller.graph.builder import build_graph

    if args.top_k is not None:
        policy = with_depth(policy, args.top_k)
    graph = build_graph(policy, index=index, embedder=embedder)
    run = run_eval(graph, dataset, concurrency=args.concurrency, progress=not args.no_progress)
    return replace(run, index=index_fingerprint(index))


def _eval(args: argparse.Namespace) -> int:
    try:
        policy = load_policy(args.policy)
        dataset = _dataset(args)
        run = _evaluate(policy, open_index(args.index), dataset, args)
    except _HANDLED as e:
        return _fail("eval", e)
    metrics = summarize(run, dataset)
    if args.json:
        payload = {
            "policy": {"policy_id": policy.policy_id, "version": policy.version},
            "dataset": _dataset_json(dataset),
            "metrics": {name: m.to_json() for name, m in metrics.items()},
        }
        print(json.dumps(payload, indent=2, sort_keys=True, allow_nan=False))
    else:
        print(f"policy {policy.policy_id} @ {policy.version} · {_dataset_line(dataset)}")
        _print_table(metrics, sys.stdout)
    return EXIT_PROMOTE


def _promote(args: argparse.Namespace) -> int:
    try:
        candidate, baseline = load_policy(args.candidate), load_policy(args.baseline)
        dataset = _dataset(args)
        index = open_index(args.index)
        embedder = QueryVectorCache(index.embedder)
        cand_run = _evaluate(candidate, index, dataset, args, embedder)
        base_run = _evaluate(baseline, index, dataset, args, embedder)
        comparison = compare_runs(
            cand_run, base_run, dataset, seed=args.seed, n_resamples=args.resamples
        )
        decision = decide(candidate.promotion, comparison)
        artifact = decision_artifact(
            candidate, baseline, dataset, comparison, decision, index=cand_run.index
        )
        if args.out is not None:
            write_decision(artifact, args.out)
    except _HANDLED as e:
        return _fail("promote", e)
    if args.json:
        sys.stdout.write(dumps_decision(artifact))
    else:
        _print_decision(candidate, baseline, dataset, comparison, decision, args.out)
    return EXIT_PROMOTE if decision.decision == "promote" else EXIT_REJECT


def _tune(args: argparse.Namespace) -> int:
    try:
        base = load_policy(args.base)
        space = load_space(args.space)
        dataset = load_beir(args.dataset, split=args.split, slices=args.slices)
        tune_half, held_out = dataset.split_halves(seed=args.seed)
        index = open_index(args.index)
        embedder = QueryVectorCache(index.embedder)
        quiet = argparse.Namespace(**{**vars(args), "no_progress": True})
        print(
            f"tune {base.policy_id} @ {base.version} · {_dataset_line(dataset)} · halves "
            f"{len(tune_half.queries)}/{len(held_out.queries)} (seed {args.seed})"
        )
        print(f"{'tune NDCG@10':>12}  overrides")

        def show(point: TunePoint) -> None:
            print(f"{point.ndcg_at_10:>12.4f}  {dict(point.overrides) or '(base)'}", flush=True)

        result = tune(
            base,
            space,
            tune_half,
            held_out,
            lambda policy, half: _evaluate(policy, index, half, quiet, embedder),
            seed=args.seed,
            n_resamples=args.resamples,
            on_point=show,
        )
        artifact = decision_artifact(
            result.candidate,
            base,
            held_out,
            result.comparison,
            result.decision,
            index=index_fingerprint(index),
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
    _print_decision(
        result.candidate, base, held_out, result.comparison, result.decision,
        args.out / "promotion.json",
    )  # fmt: skip
    verdict = "confirmed" if result.confirmed else "NOT confirmed"
    print(f"{verdict} on the held-out half; candidate policy: {candidate_file}")
    return EXIT_PROMOTE if result.confirmed else EXIT_REJECT


def _dataset_json(dataset: EvalDataset) -> dict[str, Any]:
    return {
        "name": dataset.name,
        "split": dataset.split,
        "sha256": dataset.sha256,
        "n_queries": len(dataset.queries),
        "slices_from": "labels" if dataset.labels is not None else "route",
    }


def _dataset_line(dataset: EvalDataset) -> str:
    return (
        f"dataset {dataset.name}/{dataset.split} · {len(dataset.queries)} queries · "
        f"sha256 {dataset.sha256[:12]}"
    )


def _num(value: float | None, digits: int = 4) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _print_table(metrics: Mapping[str, SliceMetrics], out: TextIO) -> None:
    width = max(len("slice"), *(len(name) for name in metrics))
    head = ("queries", "no-rel", "NDCG@10", "MRR@10", "R@10", "R@100", "p50 ms", "p95 ms", "LLM/q")
    print(f"{'slice':<{width}}  " + "  ".join(f"{h:>7}" for h in head), file=out)
    for name, m in metrics.items():
        total = m.latency_ms.get(TOTAL)
        cells = (
            str(m.n_queries),
            str(m.n_no_relevant),
            _num(m.ndcg_at_10),
            _num(m.mrr_at_10),
            _num(m.recall_at_10),
            _num(m.recall_at_100),
            _num(total.p50 if total else None, 1),
            _num(total.p95 if total else None, 1),
            _num(m.llm_calls_per_turn, 2),
        )
        print(f"{name:<{width}}  " + "  ".join(f"{c:>7}" for c in cells), file=out)


def _print_decision(
    candidate: RetrievalPolicy,
    baseline: RetrievalPolicy,
    dataset: EvalDataset,
    comparison: Comparison,
    decision: PromotionDecision,
    out_file: Path | None,
) -> None:
    print(
        f"candidate {candidate.policy_id} @ {candidate.version} vs baseline "
        f"{baseline.policy_id} @ {baseline.version} · {_dataset_line(dataset)}"
    )
    pct = round(comparison.confidence * 100)
    width = max(len("slice"), *(len(name) for name in comparison.lifts))
    print(
        f"{'slice':<{width}}  {'n':>4}  {'baseline':>8}  {'candidate':>9}  {'lift':>8}  {pct}% CI"
    )
    for name, lift in comparison.lifts.items():
        base, cand = comparison.baseline[name].ndcg_at_10, comparison.candidate[name].ndcg_at_10
        mean = "-" if lift.mean is None else f"{lift.mean:+.4f}"
        ci = "-" if lift.ci_low is None else f"[{lift.ci_low:+.4f}, {lift.ci_high:+.4f}]"
        print(f"{name:<{width}}  {lift.n:>4}  {_num(base):>8}  {_num(cand):>9}  {mean:>8}  {ci}")
    for reason in decision.reasons:
        verdict = "PASS" if reason.passed else "FAIL"
        print(f"{verdict} {reason.rule}[{reason.scope}]: {reason.detail}")
    written = f" (decision written to {out_file})" if out_file is not None else ""
    print(f"decision: {decision.decision}{written}")
