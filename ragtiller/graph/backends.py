"""Pick each tier's backend from the policy: the embedded index, or Pinecone with a fallback."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from ragtiller.core.tiers import DENSE, LEXICAL, Tier, TierRole, tier_role
from ragtiller.errors import TierUnavailable
from ragtiller.index.embedded import EmbeddedIndex
from ragtiller.nodes.components import Fallback
from ragtiller.pinecone.env import pinecone_lexical_tier_from_env, pinecone_tier_from_env
from ragtiller.pinecone.tiers import PineconeTierError
from ragtiller.policies.schema import BackendConfig, RetrievalPolicy


def tiers_for_policy(
    policy: RetrievalPolicy, index: EmbeddedIndex, *, env: Mapping[str, str] = os.environ
) -> list[Tier]:
    """The index's tiers, with dense and lexical served by the backends the policy names
    (Pinecone configured from ``env``; without a key its searches raise
    ``TierUnavailable("no-credentials")`` and the fallback answers).

    Example:
        >>> tiers = tiers_for_policy(load_policy(), index)  # doctest: +SKIP
    """
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
    """By tier name, the embedded tier of the same role behind each Pinecone tier with
    ``fallback: embedded``: tried on ``TierUnavailable``, and on Pinecone errors too with
    ``fallback_on_outage``."""
    if not isinstance(index, EmbeddedIndex):
        return {}
    own = {tier_role(t): t for t in index.tiers}
    configs: dict[TierRole, BackendConfig] = {
        DENSE: policy.dense_backend,
        LEXICAL: policy.lexical_backend,
    }
    fallbacks: dict[str, Fallback] = {}
    for tier in tiers:
        role = tier_role(tier)
        config = configs.get(role)
        if config is None or config.provider == "embedded" or config.fallback != "embedded":
            continue
        if role not in own or tier is own[role]:
            continue  # no embedded tier to fall back to, or the tier is the embedded one
        on: tuple[type[Exception], ...] = (TierUnavailable,)
        if config.fallback_on_outage:
            on += (PineconeTierError,)
        fallbacks[tier.name] = Fallback(own[role], on=on, primary="pinecone", label="embedded")
    return fallbacks
