"""Embed: turn ``embed_query`` into a vector (retry with backoff), then plan the tier fan-out."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ragtiller._retry import RetryPolicy, aretry_call
from ragtiller.nodes.components import Components, NodeFn
from ragtiller.nodes.stage import Stage, skipped
from ragtiller.policies.decisions import plan_tiers
from ragtiller.records import TierTask
from ragtiller.types import StageRecord

if TYPE_CHECKING:
    from ragtiller.graph.state import RetrievalState

EMBED_RETRY = RetryPolicy(attempts=3, base_delay_s=0.1, max_delay_s=1.0)


def make_embed(deps: Components, retry: RetryPolicy = EMBED_RETRY) -> NodeFn:
    """Build the embed node bound to ``deps``."""
    policy = deps.policy
    depth = policy.fusion.tier_depth or policy.budgets.candidate_cap

    async def embed(state: RetrievalState) -> dict[str, Any]:
        route = state["route"]
        text = state["embed_query"]
        records: list[StageRecord] = []
        vector: list[float] | None = None
        if not deps.vector_tiers:
            records.append(skipped("embed", "no-vector-tiers"))
        elif deps.embedder is None:
            records.append(skipped("embed", "no-embedder"))
        else:
            stage = Stage("embed", chars=len(text))
            embedder = deps.embedder
            try:
                embedded, attempts = await aretry_call(lambda: embedder.aembed_query(text), retry)
                vector = [float(x) for x in embedded]  # numpy floats break checkpointers
                records.append(
                    stage.done(
                        dim=len(embedded),
                        attempts=attempts,
                        truncated=route["truncated"],
                    )
                )
            except Exception as e:  # final failure: the lexical tier still answers, labelled
                records.append(
                    stage.error(
                        e,
                        "embed-failed",
                        labels=["embed failed: lexical tier only"],
                        attempts=retry.attempts,
                    )
                )

        run, skipped_tiers = plan_tiers(
            list(deps.tiers),
            list(deps.vector_tiers),
            has_vector=vector is not None,
            hybrid=bool(route["hybrid"] and route["hybrid"]["enabled"]),
            fusion=bool(route["fusion"] and route["fusion"]["enabled"]),
        )
        records.extend(
            skipped("tier_search", reason, tier=name) for name, reason in skipped_tiers.items()
        )
        tenant = state.get("tenant")
        tasks = [
            TierTask(
                tier=name,
                query=text,
                vector=vector,
                k=depth,
                namespaces=route["namespaces"],
                filter={"tenant": tenant} if tenant else None,
            )
            for name in run
        ]
        return {"tier_tasks": tasks, "stages": records}

    return embed
