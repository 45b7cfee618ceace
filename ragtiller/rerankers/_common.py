"""Helpers shared by the rerank providers: ordering by score, error text, a sync entry point."""

from __future__ import annotations

import asyncio
import logging
import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

from ragtiller.core.bulkhead import Overloaded, ProviderHung
from ragtiller.core.tiers import Candidate
from ragtiller.rerankers.base import Reranker, RerankResult

logger = logging.getLogger("ragtiller.rerankers")

_MAX_ERROR_CHARS = 300


def order_by_scores(candidates: Sequence[Candidate], scores: Sequence[float]) -> list[Candidate]:
    """Copies of ``candidates`` with ``final_score`` set, best first; ties keep the input order.

    Raises:
        ValueError: When the lengths differ or a score is not a finite number.
    """
    if len(scores) != len(candidates):
        raise ValueError(f"expected {len(candidates)} scores, but got {len(scores)}")
    values = [float(s) for s in scores]
    if not all(math.isfinite(v) for v in values):
        raise ValueError(f"scores must be finite numbers, but got {values!r}")
    scored: list[Candidate] = [
        {**c, "final_score": v} for c, v in zip(candidates, values, strict=True)
    ]
    return sorted(scored, key=lambda c: -c["final_score"])


def describe_error(exc: BaseException, *, secret: str | None = None) -> str:
    """One short line for ``RerankResult.error``: the exception type and message, secret removed."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    if secret:
        text = text.replace(secret, "***")
    line = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return line[:_MAX_ERROR_CHARS]


def error_kind(exc: BaseException) -> str:
    """A short, stable class of failure for events.

    Returns:
        ``overloaded`` or ``hung`` (its bulkhead had no worker in time, or refuses a provider
        that keeps hanging), ``timeout``, ``rate-limited`` (429), ``server-error`` (5xx),
        ``malformed-response`` (a ``ValueError``, or status 200 with a body the SDK could not
        read) or ``error``.
    """
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


class BaseReranker(ABC):
    """Base of the shipped providers: the async ``arerank`` plus a blocking ``rerank``.

    Attributes:
        name: The method name reported in ``RerankResult.method`` when this provider succeeds.
    """

    name: str

    @abstractmethod
    async def arerank(
        self, query: str, candidates: Sequence[Candidate], top_n: int
    ) -> RerankResult:
        """Return the best ``top_n`` candidates for ``query``; never raise."""

    def rerank(self, query: str, candidates: Sequence[Candidate], top_n: int) -> RerankResult:
        """Run :meth:`arerank` to completion in a new event loop.

        Raises:
            RuntimeError: When called from a running event loop (await ``arerank`` there).
        """
        return asyncio.run(self.arerank(query, candidates, top_n))


async def fall_back(
    provider: str,
    floor: Reranker,
    exc: BaseException,
    query: str,
    candidates: Sequence[Candidate],
    top_n: int,
    *,
    detail: dict[str, Any] | None = None,
    kind: str | None = None,
    secret: str | None = None,
) -> RerankResult:
    """The floor's answer after ``provider`` failed with ``exc``, with ``error`` set.

    ``method`` is the floor's (what actually ordered the candidates); ``detail`` names the
    failed provider, the floor and the class of failure (``kind``, default
    :func:`error_kind`). ``secret`` is masked in the error text.
    """
    kind = kind or error_kind(exc)
    logger.warning("rerank provider %r failed (%s); using %r", provider, kind, floor.name)
    result = await floor.arerank(query, candidates, top_n)
    return RerankResult(
        result.candidates,
        result.method,
        {
            **(detail or {}),
            "provider": provider,
            "fallback": result.method,
            "error_kind": kind,
        },
        error=describe_error(exc, secret=secret),
    )
