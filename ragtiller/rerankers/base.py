"""The rerank provider interface. Providers never raise: the node falls back to the floor anyway."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ragtiller.core.tiers import Candidate


@dataclass
class RerankResult:
    """Reordered candidates (each with ``final_score`` set) and how they were ordered.

    Attributes:
        candidates: At most ``top_n`` candidates, best first.
        method: The method that actually produced the order (``zscore``, ``identity``,
            ``cross-encoder``, ``cohere``); differs from the provider's name after a fallback.
        detail: Facts for the event and manifest (fallback reason, cache hit, cost in USD).
        error: Set when the provider failed and a fallback produced the order.
    """

    candidates: list[Candidate]
    method: str
    detail: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


@runtime_checkable
class Reranker(Protocol):
    """Reorders candidates against the user's ORIGINAL query text (``rerank_query``)."""

    name: str

    async def arerank(
        self, query: str, candidates: Sequence[Candidate], top_n: int
    ) -> RerankResult:
        """Return the best ``top_n`` candidates for ``query``; never raise."""
        ...
