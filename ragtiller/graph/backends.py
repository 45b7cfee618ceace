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
    """The index's tiers, with dense and lexical served by the backends the policy names.

    ``policy.dense_backend`` picks the dense tier's backend, ``policy.lexical_backend`` the
    lexical tier's. With ``provider: pinecone`` the tier queries Pinecone (configured from
    ``env``: ``PINECONE_API_KEY``, and ``PINECONE_HOST`` or ``PINECONE_INDEX`` for dense,
    ``PINECONE_SPARSE_HOST`` or ``PINECONE_SPARSE_INDEX`` for lexical); without a key its
    searches raise ``TierUnavailable("no-credentials")``. What answers then is the graph's
    fallback step (:func:`fallbacks_for_policy`).

    Raises:
        ConfigurationError: A Pinecone key is set without a host or index name for a tier
            served by Pinecone.

    Example:
        >>> tiers = tiers_for_policy(load_policy(), index)  # doctest: +SKIP
    """
    remote: dict[TierRole, Tier] = {}
    dense, lexical = policy.dense_backend, policy.lexical_backend
    if dense.provider == "pinecone":
        remote[DENSE] = pinecone_tier_from_env(index.embedder, env=env, timeout_s=dense.timeout_s)
    if lexical.provider == "pinecone":
        remote[LEXICAL] = pinecone_lexical_tier_from_env(env, timeout_s=lexical.timeout_s)
    return [remote.get(tier_role(t), t) for t in index.tiers]


def fallbacks_for_policy(
    policy: RetrievalPolicy, index: Any, tiers: Sequence[Tier]
) -> dict[str, Fallback]:
    """By tier name, the fallback the tier-search node tries for each of ``tiers`` that a
    Pinecone backend with ``fallback: embedded`` serves: the embedded index's tier of the same
    role, on ``TierUnavailable`` (no credentials; lexical: no BM25 statistics), and on Pinecone
    errors too with ``fallback_on_outage``. With ``fallback: none`` a tier that cannot run is
    reported ``skipped`` with its reason (``no-credentials``); an outage is its error.

    The stage record of a tier with a fallback says which one answered (``served_by``:
    ``pinecone`` or ``embedded``), and when the embedded one did, why, in a degradation label.
    """
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
