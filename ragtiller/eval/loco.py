"""``ragtiller tune --datasets``: leave-one-collection-out selection over several collections.

A default tuned on two collections can fit them and lose on the next. Here every point of the
space is scored on each collection's tune half; then, for each collection in turn, the point
with the best mean score over the OTHER collections is chosen, and that choice is judged
against the base on the held-back collection's held-out half, as ``promote`` judges.

Shipping rule: a candidate ships only when every fold chose the same point (not the base)
and every held-back collection confirmed it (decision ``promote`` and a positive lift). If
leaving one collection out changes the choice, the choice depends on the collections it was
made on, and nothing ships. (A point best on every leave-one-out mean is also best on the mean
over all collections, so the shipped candidate is the all-collection choice too.)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ragtiller.errors import EvalError
from ragtiller.eval.datasets import EvalDataset
from ragtiller.eval.tuning import (
    Confirmation,
    Evaluate,
    confirm,
    score_on,
    space_policies,
    tuned_policy,
)
from ragtiller.policies.schema import RetrievalPolicy


@dataclass(frozen=True)
class Collection:
    """One collection of a leave-one-collection-out selection.

    Attributes:
        name: Its name in the table (unique).
        tune_half: The half points are scored on.
        held_out: The half the fold that holds this collection back is judged on.
        evaluate: Runs a policy over a half of this collection (on its own index).
    """

    name: str
    tune_half: EvalDataset
    held_out: EvalDataset
    evaluate: Evaluate


@dataclass(frozen=True)
class Fold:
    """One collection held back: what the others chose and what it said.

    Attributes:
        held_back: The collection's name.
        choice: Index of the chosen point (0 is the base).
        selection_score: The chosen point's mean tune-half score over the other collections.
        candidate: The base with the chosen point's overrides, renamed.
        confirmation: The choice against the base on the held-back collection's held-out half;
            None when the fold kept the base (there is nothing to confirm).
    """

    held_back: str
    choice: int
    selection_score: float
    candidate: RetrievalPolicy
    confirmation: Confirmation | None

    @property
    def confirmed(self) -> bool:
        """Whether the held-back collection confirmed a point other than the base."""
        return self.confirmation is not None and self.confirmation.confirmed


@dataclass(frozen=True)
class LocoResult:
    """The whole selection.

    Attributes:
        points: Every point's overrides, the base (``{}``) first.
        scores: Collection name -> tune-half score of each point (parallel to ``points``).
        folds: One per collection, in input order.
        candidate: The shipped policy, or None.
        verdict: One line: what shipped, or why nothing did.
    """

    points: tuple[Mapping[str, Any], ...]
    scores: Mapping[str, tuple[float, ...]]
    folds: tuple[Fold, ...]
    candidate: RetrievalPolicy | None
    verdict: str

    @property
    def shipped(self) -> bool:
        """Whether a candidate ships."""
        return self.candidate is not None


def loco_tune(
    base: RetrievalPolicy,
    space: Mapping[str, Sequence[Any]],
    collections: Sequence[Collection],
    *,
    seed: int = 0,
    n_resamples: int = 2000,
    on_row: Callable[[Mapping[str, Any], Sequence[float]], None] | None = None,
) -> LocoResult:
    """Leave-one-collection-out selection (see the module docstring).

    Args:
        base: The base policy (point 0).
        space: The search space.
        collections: At least two, with unique names.
        seed: Bootstrap seed of the confirmations (and the tag of the candidate's version).
        n_resamples: Bootstrap resamples.
        on_row: Called with each point's overrides and its score per collection, as scored.

    Raises:
        EvalError: Fewer than two collections, or a name repeats.
        PolicyError: A point gives an invalid policy (before any run).
    """
    names = [c.name for c in collections]
    if len(collections) < 2:
        raise EvalError("leave-one-collection-out needs at least two collections")
    if len(set(names)) != len(names):
        raise EvalError(f"collection names repeat: {names}; give each dataset its own name")
    policies = space_policies(base, space)
    rows: list[tuple[float, ...]] = []
    for overrides, policy in policies:
        row = tuple(score_on(policy, c.tune_half, c.evaluate) for c in collections)
        rows.append(row)
        if on_row is not None:
            on_row(overrides, row)
    tag = f"loco-seed{seed}"
    folds = []
    for i, held in enumerate(collections):
        means = [math.fsum(r[:i] + r[i + 1 :]) / (len(r) - 1) for r in rows]
        choice = max(range(len(means)), key=lambda p: means[p])  # the first of equals
        candidate = tuned_policy(base, policies[choice][0], tag=tag)
        confirmation = None
        if choice:
            confirmation = confirm(
                candidate, base, held.held_out, held.evaluate, seed=seed, n_resamples=n_resamples
            )
        folds.append(Fold(held.name, choice, means[choice], candidate, confirmation))
    return LocoResult(
        points=tuple(o for o, _ in policies),
        scores={name: tuple(r[i] for r in rows) for i, name in enumerate(names)},
        folds=tuple(folds),
        candidate=_shipped(folds),
        verdict=_verdict(policies, folds),
    )


def _shipped(folds: Sequence[Fold]) -> RetrievalPolicy | None:
    """The folds' common candidate when every fold chose it (not the base) and confirmed it."""
    choices = {f.choice for f in folds}
    if len(choices) != 1 or not all(f.confirmed for f in folds):
        return None
    return folds[0].candidate


def _verdict(
    policies: Sequence[tuple[Mapping[str, Any], RetrievalPolicy]], folds: Sequence[Fold]
) -> str:
    choices = {f.choice for f in folds}
    if len(choices) > 1:
        return (
            "NOT shipped: the folds chose different points (the choice depends on the collections)"
        )
    (choice,) = choices
    if choice == 0:
        return "NOT shipped: every fold kept the base"
    rejected = [f.held_back for f in folds if not f.confirmed]
    if rejected:
        return f"NOT shipped: not confirmed by held-back {', '.join(rejected)}"
    return f"shipped: {dict(policies[choice][0])}, confirmed by every held-back collection"
