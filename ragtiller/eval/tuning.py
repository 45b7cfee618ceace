"""``ragtiller tune``: search a small policy space on one half of the queries, confirm on the other.

The queries are split in two with a seed. Every point of the search space (the base policy with
some fields overridden) is scored on the tune half only; the best point becomes the candidate,
and the candidate is compared with the base on the held-out half exactly as ``ragtiller
promote`` does. A held-out half the search never saw is what makes the lift believable.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ragtiller.errors import PolicyError
from ragtiller.eval.compare import Comparison, compare_runs
from ragtiller.eval.datasets import OVERALL, EvalDataset
from ragtiller.eval.promotion import PromotionDecision, decide
from ragtiller.eval.runner import EvalRun
from ragtiller.eval.summary import primary_metric, summarize
from ragtiller.eval.variants import expand_space, with_overrides
from ragtiller.policies.schema import RetrievalPolicy

Evaluate = Callable[[RetrievalPolicy, EvalDataset], EvalRun]
MAX_POINTS = 256
"""A larger space would overfit the tune half and take hours; narrow it instead."""


@dataclass(frozen=True)
class TunePoint:
    """One point of the space and its primary metric on a tune half (-1 when none is judged).

    The primary metric is NDCG@10, or answer MRR@10 for a QA dataset.
    """

    overrides: Mapping[str, Any]
    score: float


@dataclass(frozen=True)
class Confirmation:
    """A candidate against the base on a held-out half, judged as ``promote`` judges.

    Attributes:
        candidate_run: The candidate's run of the held-out half.
        baseline_run: The base's run of the held-out half.
        comparison: Candidate vs base.
        decision: The candidate's promotion rules applied to that comparison.
        confirmed: The decision is ``promote`` AND the held-out lift is above zero.
    """

    candidate_run: EvalRun
    baseline_run: EvalRun
    comparison: Comparison
    decision: PromotionDecision
    confirmed: bool


@dataclass(frozen=True)
class TuneResult:
    """What ``tune`` found and what the held-out half said about it.

    Attributes:
        points: Every point, in space order, with its tune-half score (the base first).
        best: The best point on the tune half (the earliest among equals).
        candidate: The base policy with the best point's overrides, renamed.
        confirmation: Candidate vs base on the held-out half.
    """

    points: tuple[TunePoint, ...]
    best: TunePoint
    candidate: RetrievalPolicy
    confirmation: Confirmation

    @property
    def confirmed(self) -> bool:
        """Whether the held-out half confirmed the candidate."""
        return self.confirmation.confirmed


def load_space(path: str | Path) -> dict[str, list[Any]]:
    """Read a search space: a YAML mapping of dotted policy field -> list of values.

    Example file::

        fusion.method: [rrf, zscore]
        feedback.dense_weight: [0, 1.0]   # 0: no Rocchio feedback

    Raises:
        PolicyError: The file is not such a mapping, or the space is empty or too large.
    """
    file = Path(path)
    try:
        data = yaml.safe_load(file.read_text("utf-8"))
    except (OSError, yaml.YAMLError) as e:
        raise PolicyError(f"search space {file}: {e}") from e
    if not isinstance(data, dict) or not data:
        raise PolicyError(f"search space {file}: expected a mapping of field -> list of values")
    space: dict[str, list[Any]] = {}
    for key, values in data.items():
        if not isinstance(values, list) or not values:
            raise PolicyError(f"search space {file}: {key!r} must map to a non-empty list")
        space[str(key)] = list(values)
    size = len(expand_space(space))
    if size > MAX_POINTS:
        raise PolicyError(f"search space {file} has {size} points; at most {MAX_POINTS}")
    return space


def space_policies(
    base: RetrievalPolicy, space: Mapping[str, Sequence[Any]]
) -> list[tuple[Mapping[str, Any], RetrievalPolicy]]:
    """The base (no overrides) then every point of ``space``, each as a validated policy.

    Raises:
        PolicyError: A point gives an invalid policy (so it fails before any run).
    """
    policies: list[tuple[Mapping[str, Any], RetrievalPolicy]] = [({}, base)]
    return policies + [(o, with_overrides(base, o)) for o in expand_space(space)]


def score_on(policy: RetrievalPolicy, half: EvalDataset, evaluate: Evaluate) -> float:
    """The policy's overall primary metric on ``half`` (-1 when no query is judged)."""
    value = summarize(evaluate(policy, half), half)[OVERALL].headline(primary_metric(half))
    return -1.0 if value is None else value


def tuned_policy(
    base: RetrievalPolicy, overrides: Mapping[str, Any], *, tag: str
) -> RetrievalPolicy:
    """The base with ``overrides``, renamed ``<policy_id>-tuned`` @ ``<version>+<tag>``."""
    rename = {"policy_id": f"{base.policy_id}-tuned", "version": f"{base.version}+{tag}"}
    return with_overrides(base, {**overrides, **rename})


def confirm(
    candidate: RetrievalPolicy,
    base: RetrievalPolicy,
    held_out: EvalDataset,
    evaluate: Evaluate,
    *,
    seed: int,
    n_resamples: int,
) -> Confirmation:
    """Compare ``candidate`` with ``base`` on ``held_out`` and apply the candidate's rules."""
    cand_run, base_run = evaluate(candidate, held_out), evaluate(base, held_out)
    comparison = compare_runs(cand_run, base_run, held_out, seed=seed, n_resamples=n_resamples)
    decision = decide(candidate.promotion, comparison)
    lift = comparison.lifts[OVERALL].mean
    confirmed = decision.decision == "promote" and lift is not None and lift > 0
    return Confirmation(cand_run, base_run, comparison, decision, confirmed)


def tune(
    base: RetrievalPolicy,
    space: Mapping[str, Sequence[Any]],
    tune_half: EvalDataset,
    held_out: EvalDataset,
    evaluate: Evaluate,
    *,
    seed: int = 0,
    n_resamples: int = 2000,
    on_point: Callable[[TunePoint], None] | None = None,
) -> TuneResult:
    """Search ``space`` on ``tune_half``, then compare the best point with ``base`` on ``held_out``.

    The base itself is scored first, so a space that cannot beat it picks the base (and is
    not confirmed: a zero lift confirms nothing).

    Raises:
        PolicyError: A point of the space gives an invalid policy (checked before any run).
    """
    points: list[TunePoint] = []
    for overrides, policy in space_policies(base, space):
        point = TunePoint(overrides, score_on(policy, tune_half, evaluate))
        points.append(point)
        if on_point is not None:
            on_point(point)
    best = max(points, key=lambda p: p.score)  # max keeps the first of equals: the base
    candidate = tuned_policy(base, best.overrides, tag=f"tune-seed{seed}")
    confirmation = confirm(candidate, base, held_out, evaluate, seed=seed, n_resamples=n_resamples)
    return TuneResult(tuple(points), best, candidate, confirmation)


def tune_section(
    result: TuneResult, *, seed: int, space: Mapping[str, Sequence[Any]]
) -> dict[str, Any]:
    """The artifact section recording how the candidate was chosen."""
    return {
        "seed": seed,
        "space": {k: list(v) for k, v in space.items()},
        "metric": result.confirmation.comparison.metric,
        "tune_half_scores": [
            {"overrides": dict(p.overrides), "score": round(p.score, 6)} for p in result.points
        ],
        "chosen": dict(result.best.overrides),
        "confirmed_on_held_out": result.confirmed,
    }


def dump_policy(policy: RetrievalPolicy, path: Path, *, header: str) -> None:
    """Write ``policy`` as YAML that ``load_policy`` reads back to an equal policy."""
    path.parent.mkdir(parents=True, exist_ok=True)
    body = yaml.safe_dump(policy.model_dump(mode="json"), sort_keys=False)
    comment = "".join(f"# {line}\n" for line in header.splitlines())
    path.write_text(comment + body, encoding="utf-8")
