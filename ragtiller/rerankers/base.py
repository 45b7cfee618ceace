"""The rerank provider interface, what the shipped providers share, and the free floors (the
shipped recipe's narrowing, the fusion order). Providers never raise: on any failure they answer
with their floor and say why."""

from __future__ import annotations

import asyncio
import logging
import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ragtiller.core.bulkhead import Overloaded, ProviderHung
from ragtiller.core.tiers import Candidate
from ragtiller.errors import MissingCredentialsError, describe_error
from ragtiller.ranking.recipe import narrow

logger = logging.getLogger("ragtiller.rerankers")


@dataclass
class RerankResult:
    """At most ``top_n`` candidates, best first, each with ``final_score``; ``method`` is what
    actually ordered them (after a fallback, not the provider's name); ``error`` is set when a
    fallback did."""

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
        """The best ``top_n`` candidates for ``query``; never raises."""
        ...


class BaseReranker(ABC):
    """Base of the shipped providers: the async ``arerank`` plus a blocking ``rerank``."""

    name: str

    @abstractmethod
    async def arerank(
        self, query: str, candidates: Sequence[Candidate], top_n: int
    ) -> RerankResult: ...

    def rerank(self, query: str, candidates: Sequence[Candidate], top_n: int) -> RerankResult:
        """:meth:`arerank` in a new event loop (not from a running one)."""
        return asyncio.run(self.arerank(query, candidates, top_n))


class ModelReranker(BaseReranker):
    """Sends the first ``max_candidates`` candidates to a model; when it fails, ``floor`` answers."""

    floor: Reranker
    max_candidates: int | None

    async def arerank(
        self, query: str, candidates: Sequence[Candidate], top_n: int
    ) -> RerankResult:
        sent = list(candidates[: self.max_candidates])
        detail: dict[str, Any] = {
            "provider": self.name,
            **self.facts(),
            "candidates_sent": len(sent),
        }
        if not sent or top_n <= 0:
            return RerankResult([], self.name, detail)
        try:
            ordered, extra = await self.order(query, sent, min(top_n, len(sent)))
        except Exception as e:
            kind = error_kind(e)
            logger.warning(
                "rerank provider %r failed (%s); using %r", self.name, kind, self.floor.name
            )
            result = await self.floor.arerank(query, candidates, top_n)
            detail.update(fallback=result.method, error_kind=kind)
            error = describe_error(e, secret=self.secret())
            return RerankResult(result.candidates, result.method, detail, error=error)
        return RerankResult(ordered[:top_n], self.name, {**detail, **extra})

    def facts(self) -> dict[str, Any]:
        return {}

    def secret(self) -> str | None:
        return None

    @abstractmethod
    async def order(
        self, query: str, sent: list[Candidate], top_n: int
    ) -> tuple[list[Candidate], dict[str, Any]]:
        """``sent`` in the model's order, with ``final_score``, and facts for the detail."""


def order_by_scores(candidates: Sequence[Candidate], scores: Sequence[float]) -> list[Candidate]:
    """Copies of ``candidates`` with ``final_score`` set, best first; ties keep the input order."""
    if len(scores) != len(candidates):
        raise ValueError(f"expected {len(candidates)} scores, but got {len(scores)}")
    values = [float(s) for s in scores]
    if not all(math.isfinite(v) for v in values):
        raise ValueError(f"scores must be finite numbers, but got {values!r}")
    scored: list[Candidate] = [
        {**c, "final_score": v} for c, v in zip(candidates, values, strict=True)
    ]
    return sorted(scored, key=lambda c: -c["final_score"])


def error_kind(exc: BaseException) -> str:
    """A short, stable class of failure for events (``malformed-response``: a ``ValueError``,
    or status 200 with a body the SDK could not read)."""
    if isinstance(exc, MissingCredentialsError):
        return "no-credentials"
    if isinstance(exc, Overloaded):
        return "overloaded"
    if isinstance(exc, ProviderHung):
        return "hung"
    name = type(exc).__name__.lower()
    status = getattr(getattr(exc, "response", None), "status_code", None)
    status = getattr(exc, "status_code", status)
    if isinstance(exc, TimeoutError) or "timeout" in name:
        return "timeout"
    if status == 429 or "toomanyrequests" in name:
        return "rate-limited"
    if isinstance(status, int) and status >= 500:
        return "server-error"
    if isinstance(exc, ValueError) or status == 200:
        return "malformed-response"
    return "error"


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
