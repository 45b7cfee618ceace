"""Paired comparison of two eval runs: per-query differences of the dataset's primary metric
(NDCG@10, or answer MRR@10 for a QA dataset) and bootstrap CIs per slice."""

from __future__ import annotations

import math
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ragtiller.errors import EvalError
from ragtiller.eval.datasets import OVERALL, EvalDataset
from ragtiller.eval.fingerprint import same_index
from ragtiller.eval.runner import EvalRun
from ragtiller.eval.summary import (
    SliceMetrics,
    by_slice,
    primary_metric,
    primary_scores,
    summarize,
)

DEFAULT_RESAMPLES = 2000
CONFIDENCE = 0.95


def bootstrap_ci(
    differences: Sequence[float],
    *,
    seed: int,
    n_resamples: int = DEFAULT_RESAMPLES,
    confidence: float = CONFIDENCE,
    stream: str = "",
) -> tuple[float, float]:
    """Percentile bootstrap CI of the mean of paired differences, seeded with ``(seed,
    crc32(stream))`` so each slice's draws do not depend on the others; rounded to 12
    decimals, as :attr:`Lift.mean` is, so float noise never puts a mean outside its CI.

    Example:
        >>> bootstrap_ci([0.1, 0.1, 0.1], seed=7)
        (0.1, 0.1)
    """
    if not differences:
        raise ValueError("bootstrap_ci needs at least one difference")
    if n_resamples < 100:
        raise ValueError(f"n_resamples must be >= 100, but got {n_resamples}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), but got {confidence}")
    values = np.asarray(differences, dtype=float)
    rng = np.random.default_rng(np.random.SeedSequence([seed, zlib.crc32(stream.encode())]))
    means = values[rng.integers(0, len(values), size=(n_resamples, len(values)))].mean(axis=1)
    tail = (1.0 - confidence) / 2.0 * 100.0
    low, high = np.percentile(means, [tail, 100.0 - tail])
    return round(float(low), 12), round(float(high), 12)


@dataclass(frozen=True)
class Lift:
    """Candidate minus baseline primary metric over the ``n`` judged queries of one slice."""

    n: int
    mean: float | None
    ci_low: float | None
    ci_high: float | None


@dataclass(frozen=True)
class Comparison:
    """Two runs of one dataset, both sliced by the labels or else the BASELINE's routes, so a
    query is paired with itself in one slice."""

    slices: Mapping[str, str]
    slices_from: str
    candidate: Mapping[str, SliceMetrics]
    baseline: Mapping[str, SliceMetrics]
    lifts: Mapping[str, Lift]
    seed: int
    n_resamples: int
    confidence: float
    metric: str = "ndcg_at_10"


def paired_differences(
    candidate: EvalRun, baseline: EvalRun, dataset: EvalDataset
) -> dict[str, float]:
    """Query id -> candidate minus baseline primary metric, for the judged queries."""
    cand, base = primary_scores(candidate, dataset), primary_scores(baseline, dataset)
    return {qid: c - b for qid, c in cand.items() if c is not None and (b := base[qid]) is not None}


def compare_runs(
    candidate: EvalRun,
    baseline: EvalRun,
    dataset: EvalDataset,
    *,
    seed: int = 0,
    n_resamples: int = DEFAULT_RESAMPLES,
    confidence: float = CONFIDENCE,
) -> Comparison:
    """Compare two runs of ``dataset`` (on one index, of the same queries) query by query."""
    for run in (candidate, baseline):
        if run.dataset_sha256 != dataset.sha256:
            raise EvalError(f"run of policy {run.policy_id!r} is of another dataset (hash differs)")
    if not same_index(candidate.index, baseline.index):
        raise EvalError(
            f"runs of {candidate.policy_id!r} and {baseline.policy_id!r} searched different "
            "indexes (embedder, chunking or chunks differ); compare runs on one index"
        )
    if set(candidate.results) != set(baseline.results):
        raise EvalError("the two runs do not cover the same queries")
    slices = baseline.slices(dataset)
    diffs = paired_differences(candidate, baseline, dataset)
    lifts = {}
    for name, qids in by_slice(baseline.results, slices).items():
        values = list(diffs.values()) if name == OVERALL else [diffs[q] for q in qids if q in diffs]
        if not values:
            lifts[name] = Lift(0, None, None, None)
            continue
        low, high = bootstrap_ci(
            values, seed=seed, n_resamples=n_resamples, confidence=confidence, stream=name
        )
        lifts[name] = Lift(len(values), round(math.fsum(values) / len(values), 12), low, high)
    return Comparison(
        slices=slices,
        slices_from="labels" if dataset.labels is not None else "baseline-route",
        candidate=summarize(candidate, dataset, slices=slices),
        baseline=summarize(baseline, dataset, slices=slices),
        lifts=lifts,
        seed=seed,
        n_resamples=n_resamples,
        confidence=confidence,
        metric=primary_metric(dataset),
    )
