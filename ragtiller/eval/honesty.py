"""Figures an eval can stand behind: a degraded turn did not run the policy measured, so it is
refused unless allowed; live deadlines would move the figures with the machine's load, so they
are lifted to :data:`EVAL_DEADLINE_S`."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import ClassVar, TypeVar

from ragtiller.core.run_manifest import RunManifest
from ragtiller.errors import EvalError
from ragtiller.eval.runner import EvalRun
from ragtiller.eval.variants import with_overrides
from ragtiller.policies.schema import DeadlinesConfig, RetrievalPolicy

EVAL_DEADLINE_S = 600.0
"""Far above any healthy turn, so none is cut by load, yet a hung provider still ends."""


@dataclass(frozen=True)
class _Tally:
    turns: int
    total: int
    labels: Mapping[str, int]  # label -> turns that carry it, most frequent first
    what: ClassVar[str]
    note: ClassVar[str] = ""
    key: ClassVar[str] = "labels"

    def summary(self) -> str:
        """One line: ``2 of 50 turns degraded: tier_search (dense) failed: timeout (2)``."""
        head = f"{self.turns} of {self.total} turns {self.what}"
        if not self.turns:
            return head
        return f"{head}{self.note}: " + "; ".join(f"{k} ({n})" for k, n in self.labels.items())

    def to_json(self) -> dict[str, object]:
        return {"turns": self.turns, "total": self.total, self.key: dict(self.labels)}


class Degradation(_Tally):
    """How many turns of a run were degraded, and by which labels."""

    what = "degraded"


class NotSearched(_Tally):
    """Turns the router did not search: its rule, not a fault, but they score 0, so named."""

    what, note, key = "not searched", " (the router's rule; they score 0)", "reasons"


T = TypeVar("T", bound=_Tally)


def _tally(kind: type[T], run: EvalRun, labels: Callable[[RunManifest], Iterable[str]]) -> T:
    per_turn = [set(labels(r.manifest)) for r in run.results.values()]
    counts = Counter(label for turn in per_turn for label in turn)
    ordered = dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
    return kind(sum(1 for turn in per_turn if turn), len(per_turn), ordered)


def degradation(run: EvalRun) -> Degradation:
    """Count the degraded turns of ``run`` by label."""
    return _tally(Degradation, run, lambda m: m.degraded)


def not_searched(run: EvalRun) -> NotSearched:
    return _tally(
        NotSearched,
        run,
        lambda m: [m.no_retrieval_reason or "unknown"] if m.query_type == "no_retrieval" else [],
    )


def check_degraded(run: EvalRun, *, allow: bool, what: str) -> None:
    """Refuse a run with a degraded turn, unless ``allow``."""
    found = degradation(run)
    if found.turns and not allow:
        raise EvalError(
            f"{what}: {found.summary()}; these figures are not the policy's. Fix the cause, "
            "or pass --allow-degraded to report them anyway"
        )


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
    own = ", ".join(f"{name} {value:g}" for name, value in policy.deadlines.model_dump().items())
    return f"deadlines lifted to {EVAL_DEADLINE_S:g} s for the eval (the policy's: {own})"


def depth_line(policy: RetrievalPolicy, measured: RetrievalPolicy) -> str | None:
    """The report's line when ``--top-k`` fuses more of each tier's hits than a turn of the
    policy does (deeper lists can reorder the top, docs/eval.md)."""
    own, asked = policy.budgets.candidate_cap, measured.budgets.candidate_cap
    if own == asked:
        return None
    return (
        f"each tier asked for {asked} hits, a turn of this policy for {own}: the top of this "
        "ranking can differ from a turn's (docs/eval.md)"
    )
