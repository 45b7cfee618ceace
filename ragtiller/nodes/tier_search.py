"""Tier search: one parallel branch per tier. A failing tier returns [] and an error event."""

from __future__ import annotations

from typing import Any

from ragtiller.errors import TierUnavailable
from ragtiller.nodes.components import Components, NodeFn
from ragtiller.nodes.stage import Stage
from ragtiller.records import TierTask


def make_tier_search(deps: Components) -> NodeFn:
    """Build the tier-search node; it receives a :class:`TierTask` through ``Send``."""

    async def tier_search(task: TierTask) -> dict[str, Any]:
        name = task["tier"]
        stage = Stage("tier_search", tier=name)
        try:
            hits = await deps.tiers[name].asearch(
                query=task["query"],
                vector=task["vector"],
                k=task["k"],
                namespaces=task["namespaces"],
                filter=task["filter"],
            )
        except TierUnavailable as e:
            return {"tier_hits": {name: []}, "stages": [stage.skip(e.reason, tier=name)]}
        except Exception as e:  # one tier's failure never fails the turn
            return {
                "tier_hits": {name: []},
                "stages": [stage.error(e, "tier-failed", tier=name, hits=0)],
            }
        top = hits[0]["score"] if hits else None
        return {
            "tier_hits": {name: hits},
            "stages": [stage.done(tier=name, hits=len(hits), top_score=top)],
        }

    return tier_search
