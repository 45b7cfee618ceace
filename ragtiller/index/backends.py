"""Pick each tier's backend from the policy: the embedded index, or Pinecone with a fallback."""

from __future__ import annotations

import os
from collections.abc import Mapping

from ragtiller.errors import TierUnavailable
from ragtiller.index.embedded import EmbeddedIndex
from ragtiller.index.pinecone import FallbackTier, PineconeTierError, pinecone_tier_from_env
from ragtiller.policies.schema import RetrievalPolicy
from ragtiller.types import Tier


def tiers_for_policy(
    policy: RetrievalPolicy, index: EmbeddedIndex, *, env: Mapping[str, str] = os.environ
) -> list[Tier]:
    """The index's tiers, with the dense tier served by the backend ``policy.dense_backend`` names.

    With ``provider: pinecone`` the dense tier queries Pinecone (configured from ``env``:
    ``PINECONE_API_KEY`` and ``PINECONE_HOST`` or ``PINECONE_INDEX``). With
    ``fallback: embedded`` the embedded dense tier answers when Pinecone has no credentials
    (and on Pinecone errors too when ``fallback_on_outage``); each hit's ``served_by`` says
    which one answered. With ``fallback: none`` a missing key reports the tier as
    ``skipped (no-credentials)``.

    Raises:
        ConfigurationError: A Pinecone key is set without a host or index name.

    Example:
        >>> tiers = tiers_for_policy(load_policy(), index)  # doctest: +SKIP
    """
    config = policy.dense_backend
    tiers = index.tiers
    if config.provider == "embedded":
        return tiers
    remote = pinecone_tier_from_env(index.embedder, env=env, timeout_s=config.timeout_s)
    embedded = next(t for t in tiers if t.name == "dense")
    dense: Tier = remote
    if config.fallback == "embedded":
        fallback_on: tuple[type[Exception], ...] = (TierUnavailable,)
        if config.fallback_on_outage:
            fallback_on += (PineconeTierError,)
        dense = FallbackTier(
            remote,
            embedded,
            primary_label="pinecone",
            fallback_label="embedded",
            fallback_on=fallback_on,
        )
    return [dense if t.name == "dense" else t for t in tiers]
