"""Tier search: one parallel branch per tier. A failing tier costs its own hits, labelled.

Each tier is waited for at most its deadline. A tier that says its ``asearch`` is fit for the
event loop (``native_async``) is awaited on it: ragtiller's own in-process tiers (numpy, BM25:
CPU work that cannot hang, run inline when small and off the loop when large) and a LangChain
store with its own async client. Any other tier's blocking ``search`` runs on that tier's own
bulkhead thread. Hits are checked before they enter the
state: a tier that answers nonsense is that tier's error, never a crash in fusion.

A tier with a :class:`~ragtiller.nodes.components.Fallback` (Pinecone, with the embedded tier
behind it) is one explicit step more: when the tier raises one of the fallback's errors, the
fallback is searched in the time left, and the node labels its own stage record with what
served and why. Labels come only from what the node saw, never from a hit's metadata.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from ragtiller.core.bulkhead import DeadlineExceeded, Overloaded, ProviderHung, bulkhead_for, within
from ragtiller.core.filters import scope_predicate
from ragtiller.core.tiers import HIT_FIELDS, Hit, SearchRequest, Tier
from ragtiller.core.turn import TierTask
from ragtiller.errors import TierUnavailable
from ragtiller.nodes.checks import INVALID_OUTPUT, InvalidOutput, check_hits
from ragtiller.nodes.components import Components, Fallback, NodeFn
from ragtiller.nodes.deadline import HUNG, OVERLOADED, Deadline
from ragtiller.nodes.run_input import turn_filter
from ragtiller.nodes.stage import Stage


def request_for(task: TierTask) -> SearchRequest:
    """The search ``task`` asks of its tier: its namespaces, its filter and its tenant's."""
    return SearchRequest(
        query=task["query"],
        vector=task["vector"],
        k=task["k"],
        namespaces=task["namespaces"],
        filter=turn_filter(task),
    )


async def search(tier: Tier, task: TierTask) -> Any:
    """One tier's raw answer to ``task``, within the task's deadline."""
    request = request_for(task)
    if getattr(tier, "native_async", False) is True:
        return await within(tier.asearch(request), task["deadline_s"])
    pool = bulkhead_for(tier, f"tier-{tier.name}")
    return await pool.call(tier.search, request, timeout_s=task["deadline_s"])


class Served(NamedTuple):
    """Which backend answered a tier's search (None: the tier has no fallback), and why the
    fallback did (None: the tier itself answered)."""

    by: str | None = None
    reason: str | None = None

    def detail(self) -> dict[str, str]:
        """The stage detail: ``served_by`` and ``fallback_reason``, when known."""
        pairs = (("served_by", self.by), ("fallback_reason", self.reason))
        return {key: value for key, value in pairs if value is not None}

    def labels(self, name: str) -> list[str]:
        """A label when the fallback served the tier (e.g. Pinecone -> embedded)."""
        if self.reason is None:
            return []
        return [f"tier_search ({name}) served by fallback {self.by}: {self.reason}"]


async def served(tier: Tier, fallback: Fallback | None, task: TierTask) -> tuple[Any, Served]:
    """The raw answer to ``task``: ``tier``'s, or, when it raised one of the fallback's errors,
    the fallback's within what is left of the task's deadline; and what served it and why."""
    if fallback is None:
        return await search(tier, task), Served()
    return await within(_with_fallback(tier, fallback, task), task["deadline_s"])


async def _with_fallback(tier: Tier, fallback: Fallback, task: TierTask) -> tuple[Any, Served]:
    try:
        return await search(tier, task), Served(fallback.primary)
    except fallback.on as e:
        reason = e.reason if isinstance(e, TierUnavailable) else type(e).__name__
        return await search(fallback.tier, task), Served(fallback.label, reason)


LIFTED = frozenset(HIT_FIELDS)
"""Hit fields a filter may name that adapters lift out of a document's metadata."""


def in_scope(hits: list[Hit], task: TierTask) -> tuple[list[Hit], int]:
    """The hits inside the task's namespaces and filter, and how many were not.

    Every tier is asked for the turn's scope, and ragtiller's own keep to it; this check is for
    a tier that does not (a custom tier, a store whose filter differs), so no hit of another
    tenant or namespace ever enters the turn (default deny).
    """
    scope = turn_filter(task)
    admits = scope_predicate(task["namespaces"], scope)
    lifted = LIFTED.intersection(scope or ())
    kept = [hit for hit in hits if admits(_filterable(hit, lifted) if lifted else hit["metadata"])]
    return kept, len(hits) - len(kept)


def _filterable(hit: Hit, lifted: frozenset[str]) -> dict[str, Any]:
    """The metadata a filter reads: a hit's own, and the ``lifted`` fields it names."""
    return {**{key: hit[key] for key in lifted}, **hit["metadata"]}  # type: ignore[literal-required]


def out_of_scope_labels(name: str, dropped: int) -> list[str]:
    """A label when a tier answered with hits outside the turn's scope (named by count only:
    their namespaces and tenants may be another tenant's)."""
    if not dropped:
        return []
    return [f"tier_search ({name}) dropped {dropped} hits outside the turn's namespaces and filter"]


def make_tier_search(deps: Components) -> NodeFn:
    """Build the tier-search node; it receives a :class:`TierTask` through ``Send``."""

    async def tier_search(task: TierTask) -> dict[str, Any]:
        name = task["tier"]
        stage = Stage("tier_search", tier=name)
        try:
            answer, by = await served(deps.tiers[name], deps.fallbacks.get(name), task)
            hits = check_hits(answer, task["k"])
        except TierUnavailable as e:
            return {"tier_hits": {name: []}, "stages": [stage.skip(e.reason, tier=name)]}
        except DeadlineExceeded:
            limit = Deadline(task["deadline_s"], turn_bound=task["turn_bound"])
            record = stage.error(limit.message(), limit.reason, tier=name)
            return {"tier_hits": {name: []}, "stages": [record]}
        except Overloaded:
            return {"tier_hits": {name: []}, "stages": [stage.skip(OVERLOADED, tier=name)]}
        except ProviderHung as e:
            return {"tier_hits": {name: []}, "stages": [stage.error(e, HUNG, tier=name)]}
        except InvalidOutput as e:
            return {"tier_hits": {name: []}, "stages": [stage.error(e, INVALID_OUTPUT, tier=name)]}
        except Exception as e:  # one tier's failure never fails the turn
            return {
                "tier_hits": {name: []},
                "stages": [stage.error(e, "tier-failed", tier=name, hits=0)],
            }
        hits, foreign = in_scope(hits, task)
        top = hits[0]["score"] if hits else None
        labels = by.labels(name) + out_of_scope_labels(name, foreign)
        record = stage.done(labels=labels, tier=name, hits=len(hits), top_score=top, **by.detail())
        return {"tier_hits": {name: hits}, "stages": [record]}

    return tier_search
