"""The free floors: the shipped recipe's narrowing of the fused passages, and the fusion order."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from ragtiller.core.tiers import Candidate
from ragtiller.ranking.recipe import narrow
from ragtiller.rerankers.base import BaseReranker, RerankResult, describe_error

logger = logging.getLogger(__name__)


def identity_order(candidates: Sequence[Candidate], top_n: int) -> list[Candidate]:
    """The first ``top_n`` candidates in fusion order, ``final_score`` = ``fused_score``."""
    return [
        {**c, "final_score": float(c.get("fused_score", 0.0))} for c in candidates[: max(top_n, 0)]
    ]


class IdentityReranker(BaseReranker):
    """Keeps the fusion order; ``final_score`` is the fusion score."""

    name = "identity"

    async def arerank(
        self, query: str, candidates: Sequence[Candidate], top_n: int
    ) -> RerankResult:
        return RerankResult(identity_order(candidates, top_n), self.name, {"provider": self.name})


class ZScoreReranker(BaseReranker):
    """The default floor: the shipped recipe's narrowing (:func:`ragtiller.ranking.recipe.narrow`),
    ``final_score`` the fused score; malformed candidates keep the fusion order, ``error`` set."""

    name = "zscore"

    async def arerank(
        self, query: str, candidates: Sequence[Candidate], top_n: int
    ) -> RerankResult:
        try:
            ordered = narrow(candidates, max(top_n, 0))
        except Exception as e:
            logger.warning("z-score floor failed; using the fusion order", exc_info=True)
            return RerankResult(
                identity_order(candidates, top_n),
                IdentityReranker.name,
                {"provider": self.name, "fallback": IdentityReranker.name},
                error=describe_error(e),
            )
        return RerankResult(
            identity_order(ordered, len(ordered)), self.name, {"provider": self.name}
        )
