"""The text the eval commands print: metric tables, promotion decisions, the selection table."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from ragtiller.eval.datasets import OVERALL, DatasetKind, EvalDataset
from ragtiller.eval.promotion import Judgement, Lift
from ragtiller.eval.summary import METRIC_LABELS, TOTAL, SliceMetrics
from ragtiller.eval.tuning import LocoResult
from ragtiller.policies.schema import RetrievalPolicy


def num(value: float | None, digits: int = 4) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _lift(lift: Lift) -> tuple[str, str]:
    mean = "-" if lift.mean is None else f"{lift.mean:+.4f}"
    ci = "-" if lift.ci_low is None else f"[{lift.ci_low:+.4f}, {lift.ci_high:+.4f}]"
    return mean, ci


def dataset_line(dataset: EvalDataset) -> str:
    """``dataset NAME/SPLIT (kind) · N queries · sha256 ...``."""
    return (
        f"dataset {dataset.name}/{dataset.split} ({dataset.kind}) · {len(dataset.queries)} "
        f"queries · sha256 {dataset.sha256[:12]}"
    )


def _cells(m: SliceMetrics, kind: DatasetKind) -> list[tuple[str, str]]:
    total = m.latency_ms.get(TOTAL)
    if kind == "passages":
        quality = [(f"hit@{k}", num(getattr(m, f"hit_at_{k}"))) for k in (1, 5, 10, 20)]
        quality += [
            ("aMRR@10", num(m.answer_mrr_at_10)),
            ("words/psg", num(m.words_per_passage, 0)),
            ("ctx p50", num(m.context_words.p50, 0)),
            ("ctx p95", num(m.context_words.p95, 0)),
        ]
    else:
        quality = [
            ("no-rel", str(m.n_no_relevant)),
            ("NDCG@10", num(m.ndcg_at_10)),
            ("MRR@10", num(m.mrr_at_10)),
            ("R@10", num(m.recall_at_10)),
            ("R@100", num(m.recall_at_100)),
        ]
    return [
        ("queries", str(m.n_queries)),
        *quality,
        ("p50 ms", num(total.p50 if total else None, 1)),
        ("p95 ms", num(total.p95 if total else None, 1)),
        ("LLM/q", num(m.llm_calls_per_turn, 2)),
        ("degraded", str(m.degraded_turns)),
    ]


def print_table(metrics: Mapping[str, SliceMetrics], kind: DatasetKind, out: TextIO) -> None:
    width = max(len("slice"), *(len(name) for name in metrics))
    rows = {name: _cells(m, kind) for name, m in metrics.items()}
    head = next(iter(rows.values()))
    widths = [max(7, len(h)) for h, _ in head]
    heads = "  ".join(f"{h:>{w}}" for (h, _), w in zip(head, widths, strict=True))
    print(f"{'slice':<{width}}  {heads}", file=out)
    for name, cells in rows.items():
        line = "  ".join(f"{c:>{w}}" for (_, c), w in zip(cells, widths, strict=True))
        print(f"{name:<{width}}  {line}", file=out)


def print_decision(
    candidate: RetrievalPolicy, baseline: RetrievalPolicy, judged: Judgement, out_file: Path | None
) -> None:
    """The per-slice lift table, the text each policy returned, each rule, the decision."""
    print(
        f"candidate {candidate.policy_id} @ {candidate.version} vs baseline "
        f"{baseline.policy_id} @ {baseline.version} · {dataset_line(judged.dataset)}"
    )
    comparison, decision = judged.comparison, judged.decision
    metric = comparison.metric
    width = max(len("slice"), *(len(name) for name in comparison.lifts))
    print(f"{METRIC_LABELS[metric]} per slice")
    print(
        f"{'slice':<{width}}  {'n':>4}  {'baseline':>8}  {'candidate':>9}  {'lift':>8}  "
        f"{round(comparison.confidence * 100)}% CI"
    )
    for name, lift in comparison.lifts.items():
        base = comparison.baseline[name].headline(metric)
        cand = comparison.candidate[name].headline(metric)
        mean, ci = _lift(lift)
        print(f"{name:<{width}}  {lift.n:>4}  {num(base):>8}  {num(cand):>9}  {mean:>8}  {ci}")
    b, c = comparison.baseline[OVERALL], comparison.candidate[OVERALL]
    print(
        f"text returned: words per passage {num(b.words_per_passage, 0)} -> "
        f"{num(c.words_per_passage, 0)}, context words p95 {num(b.context_words.p95, 0)} -> "
        f"{num(c.context_words.p95, 0)} (baseline -> candidate)"
    )
    for reason in decision.reasons:
        verdict = "PASS" if reason.passed else "FAIL"
        print(f"{verdict} {reason.rule}[{reason.scope}]: {reason.detail}")
    written = f" (decision written to {out_file})" if out_file is not None else ""
    print(f"decision: {decision.decision}{written}")


def print_loco_header(names: Sequence[str], metrics: Sequence[str]) -> None:
    labels = ", ".join(f"{n}: {METRIC_LABELS[m]}" for n, m in zip(names, metrics, strict=True))
    print(f"tune-half score per collection ({labels})")
    print("  ".join(f"{n[:12]:>12}" for n in names) + "  overrides")


def print_row(overrides: Mapping[str, Any], scores: Sequence[float]) -> None:
    """One row of a tune table, printed as soon as the point is scored."""
    print("  ".join(f"{s:>12.4f}" for s in scores) + f"  {dict(overrides) or '(base)'}", flush=True)


def print_loco_folds(result: LocoResult) -> None:
    print("\nfold: held back -> chosen on the others; the candidate judged on its held-out half")
    for fold in result.folds:
        chosen = f"point {fold.choice} {dict(result.points[fold.choice]) or '(base)'}"
        head = f"{fold.held_back}: {chosen} (others' mean {fold.selection_score:.4f})"
        c = fold.judgement
        if c is None:
            print(f"{head} -> no single candidate, nothing judged")
            continue
        mean, ci = _lift(c.comparison.lifts[OVERALL])
        verdict = "REJECTED" if fold.rejected else "lift" if fold.confirmed else "no lift"
        print(f"{head} -> lift {mean} {ci}, {c.decision.decision}: {verdict}")
        for reason in c.decision.reasons:
            if not reason.passed:
                print(f"  FAIL {reason.rule}[{reason.scope}]: {reason.detail}")
    print(result.verdict)
