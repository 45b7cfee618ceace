"""The free floors: the z-score combination of tier scores, and the plain fusion order."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from ragtiller.core.tiers import Candidate
from ragtiller.ranking.fusion import zscore_combine
from ragtiller.rerankers._common import BaseReranker, describe_error
from ragtiller.rerankers.base import RerankResult

logger = logging.getLogger(__name__)


def identity_order(candidates: Sequence[Candidate], top_n: int) -> list[Candidate]:
    """The first ``top_n`` candidates in fusion order, ``final_score`` = ``fused_score``."""
    return [
        {**c, "final_score": float(c.get("fused_score", 0.0))} for c in candidates[: max(top_n, 0)]
    ]


class IdentityReranker(BaseReranker):
    """Keeps the fusion order; ``final_score`` is the fusion score (RRF, z-score or min-max sum).

    Example:
        >>> from ragtiller.rerankers import IdentityReranker
        >>> IdentityReranker().rerank("q", [], top_n=5).method
        'identity'
    """

    name = "identity"

    async def arerank(
        self, query: str, candidates: Sequence[Candidate], top_n: int
    ) -> RerankResult:
        """Return the first ``top_n`` candidates unchanged in order; never raise."""
        return RerankResult(identity_order(candidates, top_n), self.name, {"provider": self.name})


class ZScoreReranker(BaseReranker):
    """The default floor: orders by the sum of each candidate's per-tier z-scores.

    ``final_score`` is unbounded and centred on 0 (0 = an average candidate in every tier); a
    tier that missed a candidate contributes that tier's lowest z (see
    :func:`ragtiller.ranking.fusion.zscore_combine`). Malformed candidates fall back to the fusion order,
    with ``error`` set.

    Args:
        weights: Weight per tier name; tiers not listed weigh 1.

    Example:
        >>> from ragtiller.rerankers import ZScoreReranker
        >>> ZScoreReranker().rerank("q", [], top_n=5).method
        'zscore'
    """

    name = "zscore"

    def __init__(self, weights: Mapping[str, float] | None = None) -> None:
        self.weights = dict(weights) if weights is not None else None

    async def arerank(
        self, query: str, candidates: Sequence[Candidate], top_n: int
    ) -> RerankResult:
        """Return the best ``top_n`` candidates by summed z-score; never raise."""
        try:
            ordered = zscore_combine(candidates, weights=self.weights)
        except Exception as e:
            logger.warning("z-score floor failed; using the fusion order", exc_info=True)
            return RerankResult(
                identity_order(candidates, top_n),
                IdentityReranker.name,
                {"provider": self.name, "fallback": IdentityReranker.name},
                error=describe_error(e),
            )
        return RerankResult(ordered[: max(top_n, 0)], self.name, {"provider": self.name})
