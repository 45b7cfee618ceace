"""``ragtiller tune --datasets``: leave-one-collection-out selection over several collections.

A default tuned on two collections can fit them and lose on the next. Here every point of the
space is scored on each collection's tune half; then, for each collection in turn, the point
with the best mean score over the OTHER collections is chosen, and that choice is judged
against the base on the held-back collection's held-out half, as ``promote`` judges.

Shipping rule: the candidate is the one point other than the base that the folds chose; folds
that chose two different points ship nothing (the choice depends on the collections it was made
on). The candidate is then judged against the base on EVERY collection's held-out half, as
``promote`` judges: on the held-back collection of each fold that chose it (the leave-one-out
confirmation proper), and on the collections whose fold kept the base. It ships when no
collection rejects it (promote's decision) and at least one shows a positive lift. A zero lift
is not a rejection: a mechanism that cannot act on a collection (every document one passage)
leaves its figures exactly as they were, and that collection has nothing against it.
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
    """One collection held back: what the others chose and what it said of the candidate.

    Attributes:
        held_back: The collection's name.
        choice: Index of the point chosen on the other collections (0 is the base).
        selection_score: The chosen point's mean tune-half score over the other collections.
        candidate: The base with the chosen point's overrides, renamed.
        judgement: The selection's candidate (the folds' common choice) against the base on
            this collection's held-out half; None when the folds chose no single candidate.
    """

    held_back: str
    choice: int
    selection_score: float
    candidate: RetrievalPolicy
    judgement: Confirmation | None

    @property
    def rejected(self) -> bool:
        """Whether this collection's held-out half rejects the candidate (promote's rules)."""
        return self.judgement is not None and self.judgement.decision.decision != "promote"

    @property
    def confirmed(self) -> bool:
        """Whether this collection's held-out half shows the candidate a positive lift."""
        return self.judgement is not None and self.judgement.confirmed


@dataclass(frozen=True)
class LocoResult:
    """The whole selection.

    Attributes:
        points: Every point's overrides, the base (``{}``) first.
        scores: Collection name -> tune-half score of each point (parallel to ``points``).
        folds: One per collection, in input order.
        judged: The folds' common choice, judged on every held-out half; None without one.
        candidate: The shipped policy (``judged``, when no collection rejects it), or None.
        verdict: One line: what shipped, or why nothing did.
    """

    points: tuple[Mapping[str, Any], ...]
    scores: Mapping[str, tuple[float, ...]]
    folds: tuple[Fold, ...]
    judged: RetrievalPolicy | None
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
    chosen: list[tuple[int, float]] = []
    for i in range(len(collections)):
        means = [math.fsum(r[:i] + r[i + 1 :]) / (len(r) - 1) for r in rows]
        choice = max(range(len(means)), key=lambda p: means[p])  # the first of equals
        chosen.append((choice, means[choice]))
    picks = {choice for choice, _ in chosen if choice}
    common = tuned_policy(base, policies[min(picks)][0], tag=tag) if len(picks) == 1 else None
    folds = []
    for held, (choice, score) in zip(collections, chosen, strict=True):
        judgement = None
        if common is not None:
            judgement = confirm(
                common, base, held.held_out, held.evaluate, seed=seed, n_resamples=n_resamples
            )
        candidate = tuned_policy(base, policies[choice][0], tag=tag)
        folds.append(Fold(held.name, choice, score, candidate, judgement))
    shipped = (
        common
        if common is not None
        and not any(f.rejected for f in folds)
        and any(f.confirmed for f in folds)
        else None
    )
    return LocoResult(
        points=tuple(o for o, _ in policies),
        scores={name: tuple(r[i] for r in rows) for i, name in enumerate(names)},
        folds=tuple(folds),
        judged=common,
        candidate=shipped,
        verdict=_verdict(policies, picks, folds),
    )


def _verdict(
    policies: Sequence[tuple[Mapping[str, Any], RetrievalPolicy]],
    picks: set[int],
    folds: Sequence[Fold],
) -> str:
    if len(picks) > 1:
        return (
            "NOT shipped: the folds chose different points (the choice depends on the collections)"
        )
    if not picks:
        return "NOT shipped: every fold kept the base"
    (choice,) = picks
    rejected = [f.held_back for f in folds if f.rejected]
    if rejected:
        return f"NOT shipped: rejected by held-out {', '.join(rejected)}"
    if not any(f.confirmed for f in folds):
        return "NOT shipped: no collection shows a lift"
    lifted = [f.held_back for f in folds if f.confirmed]
    return (
        f"shipped: {dict(policies[choice][0])}, rejected by no collection, "
        f"lift on {', '.join(lifted)}"
    )
