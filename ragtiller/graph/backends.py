"""Pick each tier's backend from the policy: the embedded index, or Pinecone with a fallback."""

from __future__ import annotations

import os
from collections.abc import Mapping

from ragtiller.adapters.combinators import FallbackTier
from ragtiller.core.tiers import DENSE, LEXICAL, Tier, TierRole, tier_role
from ragtiller.errors import TierUnavailable
from ragtiller.index.embedded import EmbeddedIndex
from ragtiller.pinecone.calls import PineconeTierError
from ragtiller.pinecone.env import pinecone_lexical_tier_from_env, pinecone_tier_from_env
from ragtiller.policies.schema import BackendConfig, RetrievalPolicy


def tiers_for_policy(
    policy: RetrievalPolicy, index: EmbeddedIndex, *, env: Mapping[str, str] = os.environ
) -> list[Tier]:
    """The index's tiers, with dense and lexical served by the backends the policy names.

    ``policy.dense_backend`` picks the dense tier's backend, ``policy.lexical_backend`` the
    lexical tier's. With ``provider: pinecone`` the tier queries Pinecone (configured from
    ``env``: ``PINECONE_API_KEY``, and ``PINECONE_HOST`` or ``PINECONE_INDEX`` for dense,
    ``PINECONE_SPARSE_HOST`` or ``PINECONE_SPARSE_INDEX`` for lexical). With
    ``fallback: embedded`` the embedded tier of the same name answers when Pinecone has no
    credentials (or, lexical, no BM25 statistics), and on Pinecone errors too when
    ``fallback_on_outage``; each hit's ``served_by`` says which one answered. With
    ``fallback: none`` a missing key reports the tier as ``skipped (no-credentials)``.

    Raises:
        ConfigurationError: A Pinecone key is set without a host or index name for a tier
            served by Pinecone.

    Example:
        >>> tiers = tiers_for_policy(load_policy(), index)  # doctest: +SKIP
    """
    tiers = index.tiers
    remote: dict[TierRole, tuple[Tier, BackendConfig]] = {}
    dense, lexical = policy.dense_backend, policy.lexical_backend
    if dense.provider == "pinecone":
        tier = pinecone_tier_from_env(index.embedder, env=env, timeout_s=dense.timeout_s)
        remote[DENSE] = (tier, dense)
    if lexical.provider == "pinecone":
        remote[LEXICAL] = (
            pinecone_lexical_tier_from_env(env, timeout_s=lexical.timeout_s),
            lexical,
        )
    return [_served(t, *remote[tier_role(t)]) if tier_role(t) in remote else t for t in tiers]


def _served(embedded: Tier, remote: Tier, config: BackendConfig) -> Tier:
    """``remote``, behind the embedded tier when the policy asks for the fallback."""
    if config.fallback != "embedded":
        return remote
    fallback_on: tuple[type[Exception], ...] = (TierUnavailable,)
    if config.fallback_on_outage:
        fallback_on += (PineconeTierError,)
    return FallbackTier(
        remote,
        embedded,
        primary_label="pinecone",
        fallback_label="embedded",
        fallback_on=fallback_on,
    )
