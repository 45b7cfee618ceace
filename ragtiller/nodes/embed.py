"""Embed: turn ``embed_query`` into a vector (retry with backoff), then plan the tier fan-out."""

from __future__ import annotations

from typing import Any

from ragtiller.core.bulkhead import DeadlineExceeded, Overloaded, ProviderHung, bulkhead_for, within
from ragtiller.core.retry import RetryPolicy, aretry_call
from ragtiller.core.tiers import StageRecord
from ragtiller.core.turn import TierTask
from ragtiller.nodes.checks import INVALID_OUTPUT, InvalidOutput, check_vector
from ragtiller.nodes.components import Components, NodeFn
from ragtiller.nodes.stage import HUNG, OVERLOADED, TURN_DEADLINE, Stage, deadline, skipped
from ragtiller.nodes.state import RetrievalState
from ragtiller.policies.decisions import plan_tiers

LEXICAL_ONLY = "embed failed: lexical tier only"
BUSY_LEXICAL_ONLY = "embed overloaded (no worker in time, not a failure): lexical tier only"
EMBED_RETRY = RetryPolicy(attempts=3, base_delay_s=0.1, max_delay_s=1.0)


async def embed_query(
    deps: Components, retry: RetryPolicy, text: str, state: RetrievalState
) -> tuple[list[float] | None, StageRecord]:
    """The query vector (None when the embedder fails or hangs) and the stage's record. The
    sync ``embed_query`` runs on the embedder's own bulkhead, so a hung one holds only its own
    threads; retries share the one deadline."""
    limit = deadline(deps.policy, deps.policy.deadlines.embed_s, state["turn"]["started_at"])
    if limit.expired:
        return None, skipped("embed", TURN_DEADLINE, labels=[LEXICAL_ONLY])
    stage = Stage("embed", chars=len(text))
    embedder = deps.embedder
    assert embedder is not None
    pool = bulkhead_for(embedder, "embedder")

    async def once() -> list[float]:
        return check_vector(await pool.call(embedder.embed_query, text, timeout_s=limit.seconds))

    try:
        vector, attempts = await within(
            aretry_call(once, retry, final=(DeadlineExceeded, Overloaded, ProviderHung)),
            limit.seconds,
        )
    except DeadlineExceeded:
        return None, stage.error(limit.message(), limit.reason, labels=[LEXICAL_ONLY])
    except Overloaded:
        return None, stage.skip(OVERLOADED, labels=[BUSY_LEXICAL_ONLY])
    except ProviderHung as e:
        return None, stage.error(e, HUNG, labels=[LEXICAL_ONLY])
    except InvalidOutput as e:
        return None, stage.error(e, INVALID_OUTPUT, labels=[LEXICAL_ONLY])
    except Exception as e:  # final failure: the lexical tier still answers, labelled
        return None, stage.error(e, "embed-failed", labels=[LEXICAL_ONLY], attempts=retry.attempts)
    return vector, stage.done(
        dim=len(vector), attempts=attempts, truncated=state["route"]["truncated"]
    )


def make_embed(deps: Components, retry: RetryPolicy = EMBED_RETRY) -> NodeFn:
    policy = deps.policy
    depth = policy.tier_hits
    roles, weights = deps.roles, deps.tier_weights

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
            vector, record = await embed_query(deps, retry, text, state)
            records.append(record)

        run, skipped_tiers = plan_tiers(
            roles,
            list(deps.vector_tiers),
            has_vector=vector is not None,
            hybrid=bool(route["hybrid"] and route["hybrid"]["enabled"]),
            parent_child=bool(route["parent_child"] and route["parent_child"]["enabled"]),
            weights=weights,
        )
        records.extend(
            skipped("tier_search", reason, tier=name) for name, reason in skipped_tiers.items()
        )
        limit = deadline(policy, policy.deadlines.tier_s, state["turn"]["started_at"])
        if limit.expired:
            records.extend(skipped("tier_search", TURN_DEADLINE, tier=name) for name in run)
            run = []
        tasks = [
            TierTask(
                tier=name,
                query=text,
                vector=vector,
                k=depth,
                tenant=route["tenant"],
                namespaces=route["namespaces"],
                filter=route["filter"],
                seal=route["seal"],
                deadline_s=limit.seconds,
                turn_bound=limit.turn_bound,
                overrides=state["turn"].get("overrides", {}),
            )
            for name in run
        ]
        return {"tier_tasks": tasks, "stages": records}

    return embed
