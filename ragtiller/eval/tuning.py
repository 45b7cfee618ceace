"""``ragtiller tune``: choose on tune halves, judge on held-out halves the search never saw;
over several collections leave-one-collection-out (docs/eval.md), as a default tuned on two
can fit them and lose on the next."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ragtiller.errors import EvalError, PolicyError
from ragtiller.eval.datasets import OVERALL, EvalDataset
from ragtiller.eval.honesty import EVAL_DEADLINE_S
from ragtiller.eval.promotion import Judgement, judge
from ragtiller.eval.runner import Evaluate
from ragtiller.eval.summary import primary_metric, summarize
from ragtiller.eval.variants import expand_space, policy_ref, with_overrides
from ragtiller.policies.schema import RetrievalPolicy

OnRow = Callable[[Mapping[str, Any], Sequence[float]], None]
MAX_POINTS = 256
"""A larger space would overfit the tune half and take hours; narrow it instead."""
SELECTION_KIND = "ragtiller.loco-selection"


@dataclass(frozen=True)
class Collection:
    """A dataset's two halves, and how a policy runs over them (on its own index)."""

    name: str
    tune_half: EvalDataset
    held_out: EvalDataset
    evaluate: Evaluate


@dataclass(frozen=True)
class TuneResult:
    """Every point (the base first), its tune-half score, the best one and its verdict."""

    points: tuple[Mapping[str, Any], ...]
    scores: tuple[float, ...]
    best: int
    candidate: RetrievalPolicy
    confirmation: Judgement


@dataclass(frozen=True)
class Fold:
    """One collection held back: the point the others chose (0: the base) and its judgement."""

    held_back: str
    choice: int
    selection_score: float
    judgement: Judgement | None

    @property
    def rejected(self) -> bool:
        return self.judgement is not None and not self.judgement.promoted

    @property
    def confirmed(self) -> bool:
        return self.judgement is not None and self.judgement.confirmed


@dataclass(frozen=True)
class LocoResult:
    """Every point, each collection's tune-half scores, the folds and the shipped policy."""

    points: tuple[Mapping[str, Any], ...]
    scores: Mapping[str, tuple[float, ...]]
    folds: tuple[Fold, ...]
    judged: RetrievalPolicy | None
    candidate: RetrievalPolicy | None
    verdict: str


def load_space(path: str | Path) -> dict[str, list[Any]]:
    """Read a search space: a YAML mapping of dotted policy field -> list of values."""
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


def _score(
    base: RetrievalPolicy,
    space: Mapping[str, Sequence[Any]],
    collections: Sequence[Collection],
    on_row: OnRow | None,
) -> tuple[list[Mapping[str, Any]], list[tuple[float, ...]]]:
    """Every point (all validated before any run) and its primary metric on each tune half."""
    points: list[Mapping[str, Any]] = [{}, *expand_space(space)]
    policies = [base, *(with_overrides(base, o) for o in points[1:])]
    rows = []
    for overrides, policy in zip(points, policies, strict=True):
        row = []
        for c in collections:
            run = c.evaluate(policy, c.tune_half)
            value = summarize(run, c.tune_half)[OVERALL].headline(primary_metric(c.tune_half))
            row.append(-1.0 if value is None else value)
        rows.append(tuple(row))
        if on_row is not None:
            on_row(overrides, rows[-1])
    return points, rows


def _tuned(base: RetrievalPolicy, overrides: Mapping[str, Any], *, tag: str) -> RetrievalPolicy:
    rename = {"policy_id": f"{base.policy_id}-tuned", "version": f"{base.version}+{tag}"}
    return with_overrides(base, {**overrides, **rename})


def tune(
    base: RetrievalPolicy,
    space: Mapping[str, Sequence[Any]],
    collection: Collection,
    *,
    seed: int = 0,
    n_resamples: int = 2000,
    on_row: OnRow | None = None,
) -> TuneResult:
    """Search ``space`` on the tune half, then judge the best point against ``base`` on the
    held-out half (the base wins ties, and a zero lift confirms nothing)."""
    points, rows = _score(base, space, [collection], on_row)
    scores = tuple(row[0] for row in rows)
    best = max(range(len(scores)), key=lambda p: scores[p])  # the first of equals: the base
    candidate = _tuned(base, points[best], tag=f"tune-seed{seed}")
    held_out, evaluate = collection.held_out, collection.evaluate
    confirmation = judge(candidate, base, held_out, evaluate, seed=seed, n_resamples=n_resamples)
    return TuneResult(tuple(points), scores, best, candidate, confirmation)


def loco_tune(
    base: RetrievalPolicy,
    space: Mapping[str, Sequence[Any]],
    collections: Sequence[Collection],
    *,
    seed: int = 0,
    n_resamples: int = 2000,
    on_row: OnRow | None = None,
) -> LocoResult:
    """Leave-one-collection-out selection over two or more collections with unique names."""
    names = [c.name for c in collections]
    if len(collections) < 2:
        raise EvalError("leave-one-collection-out needs at least two collections")
    if len(set(names)) != len(names):
        raise EvalError(f"collection names repeat: {names}; give each dataset its own name")
    points, rows = _score(base, space, collections, on_row)
    chosen: list[tuple[int, float]] = []
    for i in range(len(collections)):
        means = [math.fsum(r[:i] + r[i + 1 :]) / (len(r) - 1) for r in rows]
        choice = max(range(len(means)), key=lambda p: means[p])  # the first of equals
        chosen.append((choice, means[choice]))
    picks = {choice for choice, _ in chosen if choice}
    common = _tuned(base, points[min(picks)], tag=f"loco-seed{seed}") if len(picks) == 1 else None
    folds = []
    for held, (choice, score) in zip(collections, chosen, strict=True):
        judgement = None
        if common is not None:
            judgement = judge(
                common, base, held.held_out, held.evaluate, seed=seed, n_resamples=n_resamples
            )
        folds.append(Fold(held.name, choice, score, judgement))
    ships = not any(f.rejected for f in folds) and any(f.confirmed for f in folds)
    return LocoResult(
        points=tuple(points),
        scores={name: tuple(r[i] for r in rows) for i, name in enumerate(names)},
        folds=tuple(folds),
        judged=common,
        candidate=common if ships else None,
        verdict=_verdict(points, picks, folds),
    )


def _verdict(points: Sequence[Mapping[str, Any]], picks: set[int], folds: Sequence[Fold]) -> str:
    if len(picks) > 1:
        return (
            "NOT shipped: the folds chose different points (the choice depends on the collections)"
        )
    if not picks:
        return "NOT shipped: every fold kept the base"
    rejected = [f.held_back for f in folds if f.rejected]
    if rejected:
        return f"NOT shipped: rejected by held-out {', '.join(rejected)}"
    lifted = [f.held_back for f in folds if f.confirmed]
    if not lifted:
        return "NOT shipped: no collection shows a lift"
    return (
        f"shipped: {dict(points[min(picks)])}, rejected by no collection, "
        f"lift on {', '.join(lifted)}"
    )


def tune_section(
    result: TuneResult, *, seed: int, space: Mapping[str, Sequence[Any]]
) -> dict[str, Any]:
    """The artifact section recording how the candidate was chosen."""
    return {
        "seed": seed,
        "space": {k: list(v) for k, v in space.items()},
        "metric": result.confirmation.comparison.metric,
        "tune_half_scores": [
            {"overrides": dict(o), "score": round(s, 6)}
            for o, s in zip(result.points, result.scores, strict=True)
        ],
        "chosen": dict(result.points[result.best]),
        "confirmed_on_held_out": result.confirmation.confirmed,
    }


def selection_artifact(
    base: RetrievalPolicy,
    space: Mapping[str, Sequence[Any]],
    seed: int,
    described: Mapping[str, Mapping[str, Any]],
    result: LocoResult,
) -> dict[str, Any]:
    """The selection as JSON-ready data: collections, points, and every fold's evidence."""
    folds = [
        {
            "held_back": fold.held_back,
            "chosen": dict(result.points[fold.choice]),
            "others_mean_score": round(fold.selection_score, 6),
            "rejected": fold.rejected,
            "lift": fold.confirmed,
            "promotion": None
            if fold.judgement is None or result.judged is None
            else fold.judgement.artifact(result.judged, base),
        }
        for fold in result.folds
    ]
    return {
        "kind": SELECTION_KIND,
        "base": policy_ref(base),
        "seed": seed,
        "space": space,
        "eval_deadlines_s": EVAL_DEADLINE_S,
        "collections": dict(described),
        "points": [
            {
                "overrides": dict(overrides),
                "tune_half_scores": {name: round(s[i], 6) for name, s in result.scores.items()},
            }
            for i, overrides in enumerate(result.points)
        ],
        "folds": folds,
        "shipped": result.candidate is not None,
        "verdict": result.verdict,
        "candidate": None if result.candidate is None else policy_ref(result.candidate),
    }


def dump_policy(policy: RetrievalPolicy, path: Path, *, header: str) -> None:
    """Write ``policy`` as YAML that ``load_policy`` reads back to an equal policy."""
    path.parent.mkdir(parents=True, exist_ok=True)
    body = yaml.safe_dump(policy.model_dump(mode="json"), sort_keys=False)
    path.write_text("".join(f"# {line}\n" for line in header.splitlines()) + body, "utf-8")
