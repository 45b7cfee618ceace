"""Embed: turn ``embed_query`` into a vector (retry with backoff), then plan the tier fan-out."""

from __future__ import annotations

from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings

from ragtiller.core.bulkhead import DeadlineExceeded, Overloaded, ProviderHung, bulkhead_for, within
from ragtiller.core.retry import RetryPolicy, aretry_call
from ragtiller.core.tiers import StageRecord
from ragtiller.core.turn import TierTask
from ragtiller.models.batch_embedding import normalize_rows
from ragtiller.nodes.checks import INVALID_OUTPUT, InvalidOutput, check_vector
from ragtiller.nodes.components import Components, NodeFn
from ragtiller.nodes.deadline import HUNG, OVERLOADED, TURN_DEADLINE, deadline
from ragtiller.nodes.stage import Stage, skipped
from ragtiller.nodes.state import RetrievalState
from ragtiller.policies.decisions import plan_tiers

LEXICAL_ONLY = "embed failed: lexical tier only"
BUSY_LEXICAL_ONLY = "embed overloaded (no worker in time, not a failure): lexical tier only"
EMBED_RETRY = RetryPolicy(attempts=3, base_delay_s=0.1, max_delay_s=1.0)


async def embed_query(
    deps: Components, retry: RetryPolicy, text: str, state: RetrievalState
) -> tuple[list[float] | None, StageRecord]:
    """The query vector and the stage's record; no vector when the embedder fails or hangs.

    The embedder's sync ``embed_query`` runs on its own bulkhead, whatever its async method
    does, so a hung embedder holds only its own threads; retries share the one deadline. A
    query over ``budgets.query_window_words`` is embedded window by window in one call, and
    its vector is the windows' normalised mean.
    """
    limit = deadline(deps.policy, deps.policy.deadlines.embed_s, state["turn"]["started_at"])
    if limit.expired:
        return None, skipped("embed", TURN_DEADLINE, labels=[LEXICAL_ONLY])
    windows = query_windows(text, deps.policy.budgets.query_window_words)
    windowed: dict[str, Any] = {"windows": len(windows)} if len(windows) > 1 else {}
    stage = Stage("embed", chars=len(text), **windowed)
    embedder = deps.embedder
    assert embedder is not None
    pool = bulkhead_for(embedder, "embedder")

    async def once() -> list[float]:
        if len(windows) == 1:
            vector = await pool.call(embedder.embed_query, text, timeout_s=limit.seconds)
        else:
            vector = await pool.call(_mean_vector, embedder, windows, timeout_s=limit.seconds)
        return check_vector(vector)

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
        return None, stage.error(
            e,
            "embed-failed",
            labels=[LEXICAL_ONLY],
            attempts=retry.attempts,
        )
    return vector, stage.done(
        dim=len(vector), attempts=attempts, truncated=state["route"]["truncated"], **windowed
    )


def query_windows(text: str, words: int | None) -> list[str]:
    """``text`` as consecutive windows of at most ``words`` words (one window when it fits).

    Example:
        >>> query_windows("a b c d e", 2)
        ['a b', 'c d', 'e']
    """
    if words is None:
        return [text]
    split = text.split()
    if len(split) <= words:
        return [text]
    return [" ".join(split[i : i + words]) for i in range(0, len(split), words)]


def _mean_vector(embedder: Embeddings, windows: list[str]) -> list[float]:
    """The normalised mean of each window's unit query vector (a long query's one vector)."""
    vectors = normalize_rows(np.asarray([embedder.embed_query(w) for w in windows]))
    return [float(x) for x in normalize_rows(vectors.mean(axis=0))[0]]


def make_embed(deps: Components, retry: RetryPolicy = EMBED_RETRY) -> NodeFn:
    """Build the embed node bound to ``deps``."""
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
