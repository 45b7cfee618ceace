"""Figures an eval can stand behind: degraded turns counted, live deadlines lifted.

A turn whose manifest lists a degradation label (a stage timed out, failed, was skipped for
want of something, or fell back) did not run the policy being measured, so its figures are
not the policy's. Eval counts such turns by label and refuses the run unless told to accept
them (``--allow-degraded``).

The policy's ``deadlines.*`` protect a live user from a slow provider. On a loaded machine
they would cut turns and move an eval's figures with the load, so eval runs a copy of the
policy with every deadline set to :data:`EVAL_DEADLINE_S`; a turn that still exceeds that is
labelled, and counted as degraded like any other.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from ragtiller.errors import EvalError
from ragtiller.eval.runner import EvalRun
from ragtiller.eval.variants import with_overrides
from ragtiller.policies.schema import DeadlinesConfig, RetrievalPolicy

EVAL_DEADLINE_S = 600.0
"""Every deadline of an eval's policy copy: far above any healthy turn, so none is cut by load,
yet a hung provider still ends (labelled) instead of stalling the eval forever."""


@dataclass(frozen=True)
class Degradation:
    """How many turns of a run were degraded, and by which labels.

    Attributes:
        turns: Turns with at least one label.
        total: Turns in the run.
        labels: Label -> turns that carry it, most frequent first.
    """

    turns: int
    total: int
    labels: Mapping[str, int]

    def summary(self) -> str:
        """One line: ``2 of 50 turns degraded: tier_search (dense) failed: timeout (2)``."""
        if not self.turns:
            return f"0 of {self.total} turns degraded"
        return f"{self.turns} of {self.total} turns degraded: {_listed(self.labels)}"

    def to_json(self) -> dict[str, object]:
        """A JSON-ready dict."""
        return {"turns": self.turns, "total": self.total, "labels": dict(self.labels)}


def degradation(run: EvalRun) -> Degradation:
    """Count the degraded turns of ``run`` by label (a label counts once per turn)."""
    counts: Counter[str] = Counter()
    turns = 0
    for result in run.results.values():
        labels = set(result.manifest.degraded)
        turns += bool(labels)
        counts.update(labels)
    return Degradation(turns, len(run.results), _most_first(counts))


@dataclass(frozen=True)
class NotSearched:
    """How many turns of a run the router answered without a search, and why.

    Such a turn (``query_type: no_retrieval``: a greeting, an empty query, an input under the
    router's 12 characters with no lexical trigger) returns nothing and scores 0. That is the
    policy's own rule, not a fault, so it does not fail the eval; it is counted so that a
    collection of short queries does not score low without saying why.

    Attributes:
        turns: Turns not searched.
        total: Turns in the run.
        reasons: The router's reason -> turns, most frequent first.
    """

    turns: int
    total: int
    reasons: Mapping[str, int]

    def summary(self) -> str:
        """One line: ``2 of 50 turns not searched (the router's rule; they score 0): too-short (2)``."""
        if not self.turns:
            return f"0 of {self.total} turns not searched"
        return (
            f"{self.turns} of {self.total} turns not searched "
            f"(the router's rule; they score 0): {_listed(self.reasons)}"
        )

    def to_json(self) -> dict[str, object]:
        """A JSON-ready dict."""
        return {"turns": self.turns, "total": self.total, "reasons": dict(self.reasons)}


def not_searched(run: EvalRun) -> NotSearched:
    """Count the turns of ``run`` that the router sent to no retrieval, by its reason."""
    counts: Counter[str] = Counter(
        r.manifest.no_retrieval_reason or "unknown"
        for r in run.results.values()
        if r.manifest.query_type == "no_retrieval"
    )
    return NotSearched(sum(counts.values()), len(run.results), _most_first(counts))


def _most_first(counts: Counter[str]) -> dict[str, int]:
    """``counts`` most frequent first, ties by name."""
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def _listed(counts: Mapping[str, int]) -> str:
    """``a (2); b (1)``: what a summary line lists."""
    return "; ".join(f"{name} ({n})" for name, n in counts.items())


def check_degraded(run: EvalRun, *, allow: bool, what: str) -> Degradation:
    """The run's :func:`degradation`; raises when a turn was degraded and ``allow`` is False.

    Raises:
        EvalError: Some turn was degraded; the message lists the labels.
    """
    found = degradation(run)
    if found.turns and not allow:
        raise EvalError(
            f"{what}: {found.summary()}; these figures are not the policy's. Fix the cause, "
            "or pass --allow-degraded to report them anyway"
        )
    return found


def without_deadlines(policy: RetrievalPolicy) -> RetrievalPolicy:
    """The policy with every ``deadlines.*`` set to :data:`EVAL_DEADLINE_S` (nothing else).

    Example:
        >>> from ragtiller import load_policy
        >>> without_deadlines(load_policy()).deadlines.turn_s
        600.0
    """
    lifted = {name: EVAL_DEADLINE_S for name in DeadlinesConfig.model_fields}
    return with_overrides(policy, {"deadlines": lifted})


def deadlines_line(policy: RetrievalPolicy) -> str:
    """What the report says about deadlines: lifted, and the policy's own values."""
    own = ", ".join(f"{name} {value:g}" for name, value in policy.deadlines.model_dump().items())
    return f"deadlines lifted to {EVAL_DEADLINE_S:g} s for the eval (the policy's: {own})"


def depth_line(policy: RetrievalPolicy, measured: RetrievalPolicy) -> str | None:
    """What the report says when the eval fuses more of each tier's hits than a turn of
    ``policy`` does (``--top-k`` raises ``max_chunks``, and so the candidate cap), None when
    it fuses as many: deeper tier lists can reorder the top of the ranking, so the figures are
    then a deeper turn's than the policy's own (docs/eval.md)."""
    own, asked = policy.budgets.candidate_cap, measured.budgets.candidate_cap
    if own == asked:
        return None
    return (
        f"each tier asked for {asked} hits, a turn of this policy for {own}: the top of this "
        "ranking can differ from a turn's (docs/eval.md)"
    )
