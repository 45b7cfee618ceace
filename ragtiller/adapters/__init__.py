"""Bring your own store: any LangChain ``VectorStore`` or ``BaseRetriever`` as a tier.

``build_graph(tiers=[...])`` wraps a bare store or retriever with :func:`as_tier`; wrap it
yourself to give it a name, a role, or what its scores mean::

    build_graph(tiers=[VectorStoreTier(chroma, name="chroma"), RetrieverTier(bm25)], embedder=emb)

Each adapter states what its store's scores mean (:class:`ScoreSemantics`) and which filters
it pushes down (:data:`Pushdown`); ``tier.describe()`` says both in one line. Pseudo-relevance
feedback (``feedback.dense_weight`` above 0) moves ragtiller's own embedded dense tier only, and
leaves these tiers as they are.
"""

from __future__ import annotations

from typing import Any

from langchain_core.retrievers import BaseRetriever
from langchain_core.vectorstores import VectorStore

from ragtiller.adapters._hits import ScoreKind, ScoreSemantics
from ragtiller.adapters._scope import Pushdown
from ragtiller.adapters.retriever import RetrieverTier
from ragtiller.adapters.vector_store import VectorStoreTier
from ragtiller.core.tiers import Tier
from ragtiller.errors import ConfigurationError

TierLike = Tier | VectorStore | BaseRetriever
"""What ``build_graph(tiers=[...])`` takes: a tier, or a store or retriever to wrap."""
_TIER_MEMBERS = ("name", "needs_vector", "search")
"""What the graph calls on a tier (``asearch`` too, only when it says ``native_async``)."""


def as_tier(value: TierLike | Any, position: int = 0) -> Tier:
    """``value`` as a tier: a tier as it is, a ``VectorStore`` or ``BaseRetriever`` wrapped with
    its defaults (:class:`VectorStoreTier`, :class:`RetrieverTier`).

    Raises:
        ConfigurationError: ``value`` is none of these (the message names what is missing), or
            a store whose scores ragtiller cannot know.
    """
    if isinstance(value, VectorStore):
        return VectorStoreTier(value)
    if isinstance(value, BaseRetriever):
        return RetrieverTier(value)
    missing = [m for m in _TIER_MEMBERS if not hasattr(value, m)]
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
