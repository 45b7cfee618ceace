"""Bring your own store: any LangChain ``VectorStore`` or ``BaseRetriever`` as a tier.

``build_graph(tiers=[...])`` wraps a bare store or retriever with :func:`as_tier`; wrap it
yourself to give it a name, a role, or what its scores mean::

    build_graph(tiers=[VectorStoreTier(chroma, name="chroma"), RetrieverTier(bm25)], embedder=emb)
"""

from ragtiller.adapters.tiers import (
    Pushdown,
    RetrieverTier,
    ScoreKind,
    ScoreSemantics,
    TierLike,
    VectorStoreTier,
    as_tier,
)

__all__ = (
    "Pushdown",
    "RetrieverTier",
    "ScoreKind",
    "ScoreSemantics",
    "TierLike",
    "VectorStoreTier",
    "as_tier",
)
