"""Tier search: one parallel branch per tier; a failing tier costs its own hits, labelled, and a
tier with a :class:`~ragtiller.nodes.components.Fallback` is answered by it in the time left."""

from __future__ import annotations

from typing import Any, NamedTuple

from ragtiller.core.bulkhead import DeadlineExceeded, Overloaded, ProviderHung, bulkhead_for, within
from ragtiller.core.filters import scope_predicate
from ragtiller.core.tiers import HIT_FIELDS, Hit, SearchRequest, Tier
from ragtiller.core.turn import TierTask
from ragtiller.errors import TierUnavailable
from ragtiller.nodes.checks import INVALID_OUTPUT, InvalidOutput, check_hits
from ragtiller.nodes.components import Components, Fallback, NodeFn
from ragtiller.nodes.run_input import turn_filter
from ragtiller.nodes.stage import HUNG, OVERLOADED, Deadline, Stage


def request_for(task: TierTask) -> SearchRequest:
    return SearchRequest(
        query=task["query"],
        vector=task["vector"],
        k=task["k"],
        namespaces=task["namespaces"],
        filter=turn_filter(task),
    )


async def search(tier: Tier, task: TierTask) -> Any:
    request = request_for(task)
    if getattr(tier, "native_async", False) is True:
        return await within(tier.asearch(request), task["deadline_s"])
    pool = bulkhead_for(tier, f"tier-{tier.name}")
    return await pool.call(tier.search, request, timeout_s=task["deadline_s"])


class Served(NamedTuple):
    """Which backend answered (None: no fallback), and why the fallback did (None: it didn't)."""

    by: str | None = None
    reason: str | None = None

    def detail(self) -> dict[str, str]:
        pairs = (("served_by", self.by), ("fallback_reason", self.reason))
        return {key: value for key, value in pairs if value is not None}

    def labels(self, name: str) -> list[str]:
        if self.reason is None:
            return []
        return [f"tier_search ({name}) served by fallback {self.by}: {self.reason}"]


async def served(tier: Tier, fallback: Fallback | None, task: TierTask) -> tuple[Any, Served]:
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


def in_scope(hits: list[Hit], task: TierTask) -> tuple[list[Hit], int]:
    """The hits inside the task's scope, and how many were not: for a tier that does not keep
    to it (a custom tier, a store whose filter differs), so no other tenant's hit gets in."""
    scope = turn_filter(task)
    admits = scope_predicate(task["namespaces"], scope)
    lifted = LIFTED.intersection(scope or ())
    kept = [hit for hit in hits if admits(_filterable(hit, lifted) if lifted else hit["metadata"])]
    return kept, len(hits) - len(kept)


def _filterable(hit: Hit, lifted: frozenset[str]) -> dict[str, Any]:
    return {**{key: hit[key] for key in lifted}, **hit["metadata"]}  # type: ignore[literal-required]


def out_of_scope_labels(name: str, dropped: int) -> list[str]:
    # named by count only: they may be another tenant's
    if not dropped:
        return []
    return [f"tier_search ({name}) dropped {dropped} hits outside the turn's namespaces and filter"]


def make_tier_search(deps: Components) -> NodeFn:

    async def tier_search(task: TierTask) -> dict[str, Any]:
        name = task["tier"]
        stage = Stage("tier_search", tier=name)
        try:
            answer, by = await served(deps.tiers[name], deps.fallbacks.get(name), task)
            hits = check_hits(answer, task["k"])
        except TierUnavailable as e:
            failed = stage.skip(e.reason, tier=name)
        except DeadlineExceeded:
            limit = Deadline(task["deadline_s"], turn_bound=task["turn_bound"])
            failed = stage.error(limit.message(), limit.reason, tier=name)
        except Overloaded:
            failed = stage.skip(OVERLOADED, tier=name)
        except ProviderHung as e:
            failed = stage.error(e, HUNG, tier=name)
        except InvalidOutput as e:
            failed = stage.error(e, INVALID_OUTPUT, tier=name)
        except Exception as e:  # one tier's failure never fails the turn
            failed = stage.error(e, "tier-failed", tier=name, hits=0)
        else:
            hits, foreign = in_scope(hits, task)
            top = hits[0]["score"] if hits else None
            labels = by.labels(name) + out_of_scope_labels(name, foreign)
            done = stage.done(
                labels=labels, tier=name, hits=len(hits), top_score=top, **by.detail()
            )
            return {"tier_hits": {name: hits}, "stages": [done]}
        return {"tier_hits": {name: []}, "stages": [failed]}

    return tier_search
