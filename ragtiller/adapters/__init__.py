"""Bring your own store: any LangChain ``VectorStore`` or ``BaseRetriever`` as a tier.

``build_graph(tiers=[...])`` wraps a bare store or retriever with :func:`as_tier`; wrap it
yourself to give it a name, a role, or what its scores mean::

    build_graph(tiers=[VectorStoreTier(chroma, name="chroma"), RetrieverTier(bm25)], embedder=emb)
"""

from __future__ import annotations

from typing import Any

from langchain_core.retrievers import BaseRetriever
from langchain_core.vectorstores import VectorStore

from ragtiller.adapters.tiers import (
    Pushdown,
    RetrieverTier,
    ScoreKind,
    ScoreSemantics,
    VectorStoreTier,
)
from ragtiller.core.tiers import Tier
from ragtiller.errors import ConfigurationError

TierLike = Tier | VectorStore | BaseRetriever
"""What ``build_graph(tiers=[...])`` takes: a tier, or a store or retriever to wrap."""


def as_tier(value: TierLike | Any, position: int = 0) -> Tier:
    """``value`` as a tier: a tier as it is, a ``VectorStore`` or ``BaseRetriever`` wrapped with
    its defaults."""
    if isinstance(value, VectorStore):
        return VectorStoreTier(value)
    if isinstance(value, BaseRetriever):
        return RetrieverTier(value)
    missing = [m for m in ("name", "needs_vector", "search") if not hasattr(value, m)]
    if missing:
        raise ConfigurationError(
            f"tiers[{position}] is a {type(value).__name__}: not a ragtiller Tier (it lacks "
            f"{', '.join(missing)}), a LangChain VectorStore or a BaseRetriever"
        )
    tier: Tier = value
    return tier


__all__ = (
    "Pushdown",
    "RetrieverTier",
    "ScoreKind",
    "ScoreSemantics",
    "TierLike",
    "VectorStoreTier",
    "as_tier",
)
