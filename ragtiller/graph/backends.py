"""The policy's tier options, applied when a graph is built: backends, dense search, window."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from ragtiller.core.tiers import DENSE, LEXICAL, Tier, TierRole, tier_role
from ragtiller.errors import ConfigurationError, TierUnavailable
from ragtiller.index.dense_tier import DenseTier
from ragtiller.index.embedded import EmbeddedIndex
from ragtiller.index.parent_child import ParentChildTier
from ragtiller.nodes.components import Fallback
from ragtiller.pinecone.env import pinecone_lexical_tier_from_env, pinecone_tier_from_env
from ragtiller.pinecone.tiers import PineconeTierError
from ragtiller.policies.schema import RetrievalPolicy


def tiers_for_policy(
    policy: RetrievalPolicy, index: EmbeddedIndex, *, env: Mapping[str, str] = os.environ
) -> list[Tier]:
    """The index's tiers, dense and lexical served by the policy's backends."""
    remote: dict[TierRole, Tier] = {}
    dense, lexical = policy.dense_backend, policy.lexical_backend
    if dense.provider == "pinecone":
        remote[DENSE] = pinecone_tier_from_env(
            index.embedder, env=env, timeout_s=policy.deadlines.pinecone_s
        )
    if lexical.provider == "pinecone":
        remote[LEXICAL] = pinecone_lexical_tier_from_env(env, timeout_s=policy.deadlines.pinecone_s)
    return [remote.get(tier_role(t), t) for t in index.tiers]


def fallbacks_for_policy(
    policy: RetrievalPolicy, index: Any, tiers: Sequence[Tier]
) -> dict[str, Fallback]:
    """By tier name, the embedded tier behind each Pinecone tier with ``fallback: embedded``."""
    if not isinstance(index, EmbeddedIndex):
        return {}
    own = {tier_role(t): t for t in index.tiers}
    configs = {DENSE: policy.dense_backend, LEXICAL: policy.lexical_backend}
    fallbacks: dict[str, Fallback] = {}
    for tier in tiers:
        role = tier_role(tier)
        config = configs.get(role)
        if config is None or config.provider == "embedded" or config.fallback != "embedded":
            continue
        if role not in own or tier is own[role]:
            continue  # no embedded tier to fall back to, or the tier is the embedded one
        outage = (PineconeTierError,) if config.fallback_on_outage else ()
        on: tuple[type[Exception], ...] = (TierUnavailable, *outage)
        fallbacks[tier.name] = Fallback(own[role], on=on, primary="pinecone", label="embedded")
    return fallbacks


def apply_query_options(
    policy: RetrievalPolicy, tiers: Sequence[Tier], index: Any | None
) -> list[Tier]:
    """``auto`` takes the store's HNSW graph where it has one; ``approximate`` builds one."""
    search = policy.dense_backend.search
    out: list[Tier] = []
    for tier in tiers:
        if not isinstance(tier, DenseTier | ParentChildTier):
            out.append(tier)
            continue
        store = tier.store
        if search == "approximate" and store.ann is None:
            if getattr(index, "store", None) is not store or not hasattr(index, "ann"):
                raise ConfigurationError(
                    f"dense_backend.search is approximate but the {tier.name} tier's store has "
                    "no HNSW graph: attach one (NumpyVectorStore.attach_ann), or pass index=..."
                )
            index.ann()  # type: ignore[union-attr]  # checked: hasattr(index, "ann")
        out.append(tier.with_search(store.ann is not None and search != "exact"))
    return [
        t.with_window(policy.budgets.window_words) if isinstance(t, ParentChildTier) else t
        for t in out
    ]
