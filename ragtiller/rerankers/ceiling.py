"""Cost control around a paid reranker: cache, budgets, credentials and latency decide each call."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from typing import Any, Literal

from ragtiller.core.tiers import RERANK_RESOURCE, Candidate
from ragtiller.errors import ConfigurationError
from ragtiller.policies.schema import CacheConfig, RerankerConfig
from ragtiller.rerankers._common import BaseReranker, describe_error, error_kind, order_by_scores
from ragtiller.rerankers.base import Reranker, RerankResult
from ragtiller.rerankers.cohere_rerank import MAX_DOCUMENTS_PER_CALL
from ragtiller.rerankers.latency import LatencyWindow
from ragtiller.stores import Cache, MemoryCache, MemoryQuotaLedger, QuotaLedger, cache_key

logger = logging.getLogger(__name__)

"""Ledger resource spent once per ceiling call (never for a cache hit)."""

CeilingOutcome = Literal["used", "skipped", "error"]
_REFUNDED_KINDS = frozenset({"rate-limited", "server-error"})
"""Failures answered by the provider before any work: the call is given back to the budget."""


class _Skipped(Exception):
    """The ceiling was not called; raised inside the cache computation so nothing is cached."""

    def __init__(self, reason: str, **detail: Any) -> None:
        super().__init__(reason)
        self.reason = reason
        self.detail = detail


class _Failed(Exception):
    """The ceiling was called and failed; nothing is cached."""

    def __init__(
        self, error: str, kind: str, ms: float, floor_order: RerankResult | None = None
    ) -> None:
        super().__init__(error)
        self.error = error
        self.kind = kind
        self.ms = ms
        self.floor_order = floor_order
        """The ceiling's own fallback order, when it already ran our floor (not run twice)."""


class CeilingReranker(BaseReranker):
    """Uses a paid ``ceiling`` reranker when it is affordable and healthy, else the free ``floor``.

    Each call, in this order:

    1. disabled (``disabled_reason``, e.g. ``no-eval-lift``) or no candidates -> floor;
    2. the cache, keyed by the ceiling's name, the query and the sorted ids of the candidates
       sent, kept ``cache_ttl_s`` seconds: a hit costs nothing (``from_cache: True``),
       and concurrent identical calls share one ceiling call;
    3. credentials missing (a ceiling whose ``has_credentials`` is false) -> ``no-credentials``;
    4. the ceiling's observed p95 added latency (see :class:`LatencyWindow`) above
       ``config.max_p95_latency_ms_added`` -> ``latency``;
    5. one unit of the ledger's ``rerank_calls`` spent: refused -> ``budget``, or
       ``quota-store-unavailable`` when the ledger's store failed (quotas fail closed);
    6. the ceiling's call, given the candidates (the rerank stage's candidate cap, ``budgets``),
       at most the first 100 (one Cohere search unit): any failure
       (HTTP 429/5xx, timeout, malformed response) -> floor, with ``error`` set. A 429 or 5xx
       gives the unit back to the ledger; a timeout or malformed answer keeps it spent (the
       provider may have billed it).

    The added latency is the ceiling call's wall time (the floor it replaces costs ~0 ms);
    cache hits and skipped calls add no sample. ``detail`` always holds ``provider`` (the
    ceiling's name), ``ceiling`` (``used`` | ``skipped`` | ``error``), ``ceiling_reason``
    (None when used), ``from_cache``, ``cost_usd`` (the configured cost of a call made now,
    else 0) and ``candidates_sent``; plus ``floor``, and ``latency_p95_ms`` once known.

    Args:
        ceiling: The paid reranker (its ``name`` is reported as ``provider``).
        floor: The free reranker used whenever the ceiling is not.
        config: The policy's reranker section.
        ledger: Daily call budget; must have a limit for ``rerank_calls``. Default: an
            in-process ledger of ``config.daily_calls`` calls a day.
        cache: Result cache; default: an in-process :class:`~ragtiller.stores.MemoryCache`.
        disabled_reason: When set, the ceiling is never called and this is the reason.
        disabled_note: A human-readable explanation reported next to ``disabled_reason``.
        latency: The latency window; default ``LatencyWindow()`` (20 calls, 5 minutes).
        cache_ttl_s: How long an order is cached (``cache.ttl_s``); None: the default policy's.

    Raises:
        ConfigurationError: ``ledger`` has no ``rerank_calls`` limit (checked only when the
            ceiling is not disabled).

    Example:
        >>> from ragtiller.policies.schema import CacheConfig, RerankerConfig
        >>> from ragtiller.rerankers import CeilingReranker, CohereReranker, ZScoreReranker
        >>> reranker = CeilingReranker(CohereReranker(env={}), ZScoreReranker(), RerankerConfig())
        >>> candidate = {"id": "a", "text": "t", "doc_id": "d", "parent_id": None, "source": "s",
        ...              "metadata": {}, "tier_scores": {}, "tier_ranks": {}, "tier_z": {},
        ...              "fused_score": 0.5}
        >>> result = reranker.rerank("q", [candidate], top_n=1)
        >>> result.method, result.detail["ceiling"], result.detail["ceiling_reason"]
        ('zscore', 'skipped', 'no-credentials')
    """

    def __init__(
        self,
        ceiling: Reranker,
        floor: Reranker,
        config: RerankerConfig,
        ledger: QuotaLedger | None = None,
        cache: Cache | None = None,
        *,
        disabled_reason: str | None = None,
        disabled_note: str | None = None,
        latency: LatencyWindow | None = None,
        cache_ttl_s: int | None = None,
    ) -> None:
        if ledger is None:
            ledger = MemoryQuotaLedger({RERANK_RESOURCE: config.daily_calls})
        elif disabled_reason is None:  # a disabled ceiling never asks the ledger
            _check_ledger(ledger, config.daily_calls)
        self.name = ceiling.name
        self.ceiling = ceiling
        self.floor = floor
        self.config = config
        self.ledger = ledger
        self.cache: Cache = cache if cache is not None else MemoryCache()
        self.disabled_reason = disabled_reason
        self.disabled_note = disabled_note
        self.latency = latency or LatencyWindow()
        self.cache_ttl_s = cache_ttl_s or CacheConfig().ttl_s

    async def arerank(
        self, query: str, candidates: Sequence[Candidate], top_n: int
    ) -> RerankResult:
        """Return the best ``top_n`` candidates, by the ceiling when allowed; never raise."""
        if self.disabled_reason is not None:
            note: dict[str, Any] = (
                {"ceiling_note": self.disabled_note} if self.disabled_note else {}
            )
            return await self._floor(
                query, candidates, top_n, "skipped", self.disabled_reason, **note
            )
        sent = list(candidates[:MAX_DOCUMENTS_PER_CALL])
        if not sent or top_n <= 0:
            return await self._floor(query, candidates, top_n, "skipped", "no-candidates")
        key = cache_key("rerank", self.ceiling.name, query, *sorted(c["id"] for c in sent))
        try:
            ranking, from_cache = await self.cache.aget_or_compute(
                key, lambda: self._call(query, sent), self.cache_ttl_s
            )
            ordered = _restore(sent, ranking)
        except _Skipped as s:
            return await self._floor(query, candidates, top_n, "skipped", s.reason, **s.detail)
        except _Failed as f:
            return await self._floor(
                query,
                candidates,
                top_n,
                "error",
                f.kind,
                error=f.error,
                floor_order=f.floor_order,
                candidates_sent=len(sent),
                ceiling_ms=round(f.ms, 1),
            )
        except Exception as e:
            logger.warning(
                "rerank ceiling %r failed outside its call", self.ceiling.name, exc_info=True
            )
            return await self._floor(
                query, candidates, top_n, "error", error_kind(e), error=describe_error(e)
            )
        detail = self._detail(
            "used",
            None,
            from_cache=from_cache,
            cost_usd=0.0 if from_cache else self.config.cost_usd_per_call,
            candidates_sent=0 if from_cache else len(sent),
        )
        return RerankResult(ordered[:top_n], self.ceiling.name, detail)

    @property
    def enabled(self) -> bool:
        """Whether the ceiling may be called at all (no ``disabled_reason``)."""
        return self.disabled_reason is None

    async def afloor(
        self, query: str, candidates: Sequence[Candidate], top_n: int, reason: str
    ) -> RerankResult:
        """The floor's order, reported as the ceiling skipped for ``reason``.

        The graph calls this when the turn's quota view already shows no call left, so the
        ceiling's cache and rules are not consulted.
        """
        return await self._floor(query, candidates, top_n, "skipped", reason)

    def close(self) -> None:
        """Close the ceiling's and the floor's connections, when they hold any."""
        for part in (self.ceiling, self.floor):
            close = getattr(part, "close", None)
            if callable(close):
                close()

    async def _call(self, query: str, sent: list[Candidate]) -> list[list[Any]]:
        """Check the rules, spend one call, call the ceiling; return ``[[id, score], ...]``."""
        if not bool(getattr(self.ceiling, "has_credentials", True)):
            raise _Skipped("no-credentials")
        p95 = self.latency.p95()
        if p95 is not None and p95 > self.config.max_p95_latency_ms_added:
            raise _Skipped("latency", max_p95_latency_ms_added=self.config.max_p95_latency_ms_added)
        spend = await self.ledger.atry_spend(RERANK_RESOURCE)
        if not spend.allowed:
            reason = (
                "quota-store-unavailable" if spend.reason == "quota-store-unavailable" else "budget"
            )
            raise _Skipped(reason, calls_remaining=spend.remaining)

        start = time.perf_counter()
        try:
            result = await self.ceiling.arerank(query, sent, len(sent))
        except Exception as e:  # a third-party ceiling broke the never-raise contract
            logger.warning("rerank ceiling %r raised", self.ceiling.name, exc_info=True)
            result = RerankResult(
                [], "none", {"error_kind": error_kind(e)}, error=describe_error(e)
            )
        ms = (time.perf_counter() - start) * 1000.0
        self.latency.add(ms)
        if result.error is not None or result.method != self.ceiling.name:
            kind = str(result.detail.get("error_kind", "error"))
            if kind in _REFUNDED_KINDS:
                await self.ledger.arefund(RERANK_RESOURCE)
            ran_floor = result.method == self.floor.name and bool(result.candidates)
            raise _Failed(
                result.error or f"ceiling answered with method {result.method!r}",
                kind,
                ms,
                floor_order=result if ran_floor else None,
            )
        ranking = [[c["id"], c.get("final_score")] for c in result.candidates]
        try:
            _restore(sent, ranking)
        except ValueError as e:
            raise _Failed(describe_error(e), "malformed-response", ms) from e
        return ranking

    async def _floor(
        self,
        query: str,
        candidates: Sequence[Candidate],
        top_n: int,
        outcome: CeilingOutcome,
        reason: str,
        *,
        error: str | None = None,
        floor_order: RerankResult | None = None,
        **extra: Any,
    ) -> RerankResult:
        """The floor's order (``floor_order`` when the ceiling already ran the floor)."""
        if floor_order is not None:
            result = RerankResult(floor_order.candidates[:top_n], floor_order.method)
        else:
            result = await self.floor.arerank(query, candidates, top_n)
        if result.error is not None:
            error = f"{error}; floor: {result.error}" if error else f"floor: {result.error}"
        detail = self._detail(outcome, reason, **extra)
        if result.method != self.floor.name:
            detail["floor_fallback"] = result.method
        return RerankResult(result.candidates, result.method, detail, error=error)

    def _detail(self, outcome: CeilingOutcome, reason: str | None, **extra: Any) -> dict[str, Any]:
        detail: dict[str, Any] = {
            "provider": self.ceiling.name,
            "ceiling": outcome,
            "ceiling_reason": reason,
            "from_cache": False,
            "cost_usd": 0.0,
            "candidates_sent": 0,
            "floor": self.floor.name,
        }
        p95 = self.latency.p95()
        if p95 is not None:
            detail["latency_p95_ms"] = round(p95, 1)
        return {**detail, **extra}


def _check_ledger(ledger: QuotaLedger, daily_calls: int) -> None:
    """Refuse a ledger without a ``rerank_calls`` limit; warn when its limit is not the policy's.

    Raises:
        ConfigurationError: No ``rerank_calls`` limit.
    """
    if RERANK_RESOURCE not in ledger.limits:
        raise ConfigurationError(
            f"the quota ledger has no {RERANK_RESOURCE!r} limit; create it with "
            f"limits={{{RERANK_RESOURCE!r}: {daily_calls}}} (reranker.daily_calls)"
        )
    if ledger.limits[RERANK_RESOURCE] != daily_calls:
        logger.warning(
            "the ledger allows %d %s a day but the policy says %d; the ledger's limit applies",
            ledger.limits[RERANK_RESOURCE],
            RERANK_RESOURCE,
            daily_calls,
        )


def _restore(sent: list[Candidate], ranking: Any) -> list[Candidate]:
    """The sent candidates in the ceiling's order, ``final_score`` from ``[[id, score], ...]``.

    Raises:
        ValueError: The ranking names an unknown id or holds a score that is not a finite number.
    """
    by_id = {c["id"]: c for c in sent}
    picked: list[Candidate] = []
    scores: list[float] = []
    for cid, score in ranking:
        if cid not in by_id or not isinstance(score, int | float) or not math.isfinite(score):
            raise ValueError(f"rerank ranking has an unknown id or a bad score: {cid!r}, {score!r}")
        picked.append(by_id[cid])
        scores.append(float(score))
    return order_by_scores(picked, scores)
