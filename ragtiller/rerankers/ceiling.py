"""Cost control around a paid reranker: cache, budgets, credentials and latency decide each call
(the rules, in order, are in docs/rerank.md); and the floor and ceiling a policy asks for."""

from __future__ import annotations

import logging
import math
import os
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from langchain_core.documents import BaseDocumentCompressor

from ragtiller.core.tiers import RERANK_RESOURCE, Candidate
from ragtiller.errors import ConfigurationError, describe_error
from ragtiller.policies.evidence import read_eval_evidence
from ragtiller.policies.schema import CacheConfig, RerankerConfig
from ragtiller.rerankers.base import (
    BaseReranker,
    IdentityReranker,
    Reranker,
    RerankResult,
    ZScoreReranker,
    error_kind,
    order_by_scores,
)
from ragtiller.rerankers.cohere_rerank import MAX_DOCUMENTS_PER_CALL, CohereReranker
from ragtiller.rerankers.cross_encoder import CrossEncoderReranker, PairScorer
from ragtiller.stores import Cache, MemoryCache, MemoryQuotaLedger, QuotaLedger, cache_key

logger = logging.getLogger(__name__)

CeilingOutcome = Literal["used", "skipped", "error"]
_REFUNDED_KINDS = frozenset({"rate-limited", "server-error"})
"""Failures answered by the provider before any work: the call is given back to the budget."""


class LatencyWindow:
    """The ceiling's latency over its latest ``size`` calls, each forgotten after ``max_age_s``
    (so a ceiling switched off for being slow is tried again), and its p95."""

    def __init__(
        self,
        size: int = 20,
        *,
        max_age_s: float = 300.0,
        min_samples: int = 5,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if size < 1 or min_samples < 1 or not max_age_s > 0:
            raise ConfigurationError(
                "size, min_samples and max_age_s must be > 0, "
                f"but got {size}, {min_samples}, {max_age_s}"
            )
        self.max_age_s = max_age_s
        self.min_samples = min_samples
        self._clock = clock
        self._samples: deque[tuple[float, float]] = deque(maxlen=size)

    def add(self, ms: float) -> None:
        self._samples.append((self._clock(), ms))

    def p95(self) -> float | None:
        """The nearest-rank p95 in ms; None below ``min_samples`` (one slow cold start must not
        switch the ceiling off)."""
        cutoff = self._clock() - self.max_age_s
        while self._samples and self._samples[0][0] < cutoff:
            self._samples.popleft()
        if len(self._samples) < self.min_samples:
            return None
        values = sorted(ms for _, ms in self._samples)
        return values[math.ceil(0.95 * len(values)) - 1]


class _Floor(Exception):
    """The ceiling's order is not used; raised inside the cache computation so nothing is cached."""

    def __init__(self, outcome: CeilingOutcome, reason: str, **extra: Any) -> None:
        super().__init__(reason)
        self.outcome = outcome
        self.reason = reason
        self.extra = extra


class CeilingReranker(BaseReranker):
    """The paid ``ceiling`` when it is affordable and healthy, else the free ``floor``."""

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
        if self.disabled_reason is not None:
            note: dict[str, Any] = (
                {"ceiling_note": self.disabled_note} if self.disabled_note else {}
            )
            reason = self.disabled_reason
            return await self._floor(query, candidates, top_n, "skipped", reason, **note)
        sent = list(candidates[:MAX_DOCUMENTS_PER_CALL])  # one Cohere search unit
        if not sent or top_n <= 0:
            return await self._floor(query, candidates, top_n, "skipped", "no-candidates")
        key = cache_key("rerank", self.ceiling.name, query, *sorted(c["id"] for c in sent))
        try:
            ranking, from_cache = await self.cache.aget_or_compute(
                key, lambda: self._call(query, sent), self.cache_ttl_s
            )
            ordered = _restore(sent, ranking)
        except _Floor as f:
            return await self._floor(query, candidates, top_n, f.outcome, f.reason, **f.extra)
        except Exception as e:
            logger.warning(
                "rerank ceiling %r failed outside its call", self.ceiling.name, exc_info=True
            )
            return await self._floor(
                query, candidates, top_n, "error", error_kind(e), error=describe_error(e)
            )
        paid = {"cost_usd": self.config.cost_usd_per_call, "candidates_sent": len(sent)}
        detail = self._detail("used", None, from_cache=from_cache, **({} if from_cache else paid))
        return RerankResult(ordered[:top_n], self.ceiling.name, detail)

    @property
    def enabled(self) -> bool:
        return self.disabled_reason is None

    async def afloor(
        self, query: str, candidates: Sequence[Candidate], top_n: int, reason: str
    ) -> RerankResult:
        """The floor's order, the ceiling skipped for ``reason`` (the turn's quota view shows no
        call left: the cache and rules are not consulted)."""
        return await self._floor(query, candidates, top_n, "skipped", reason)

    def close(self) -> None:
        for part in (self.ceiling, self.floor):
            close = getattr(part, "close", None)
            if callable(close):
                close()

    async def _call(self, query: str, sent: list[Candidate]) -> list[list[Any]]:
        """Check the rules, spend one call, call the ceiling; return ``[[id, score], ...]``."""
        if not bool(getattr(self.ceiling, "has_credentials", True)):
            raise _Floor("skipped", "no-credentials")
        p95 = self.latency.p95()
        limit = self.config.max_p95_latency_ms_added
        if p95 is not None and p95 > limit:
            raise _Floor("skipped", "latency", max_p95_latency_ms_added=limit)
        spend = await self.ledger.atry_spend(RERANK_RESOURCE)
        if not spend.allowed:
            unavailable = spend.reason == "quota-store-unavailable"
            reason = "quota-store-unavailable" if unavailable else "budget"
            raise _Floor("skipped", reason, calls_remaining=spend.remaining)
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
        failed = {"candidates_sent": len(sent), "ceiling_ms": round(ms, 1)}
        if result.error is not None or result.method != self.ceiling.name:
            kind = str(result.detail.get("error_kind", "error"))
            if kind in _REFUNDED_KINDS:
                await self.ledger.arefund(RERANK_RESOURCE)
            ran_floor = result.method == self.floor.name and bool(result.candidates)
            raise _Floor(
                "error",
                kind,
                error=result.error or f"ceiling answered with method {result.method!r}",
                floor_order=result if ran_floor else None,  # not run twice
                **failed,
            )
        ranking = [[c["id"], c.get("final_score")] for c in result.candidates]
        try:
            _restore(sent, ranking)
        except ValueError as e:
            raise _Floor("error", "malformed-response", error=describe_error(e), **failed) from e
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
    """The sent candidates in the order of ``[[id, score], ...]``; ValueError if one is bad."""
    by_id = {c["id"]: c for c in sent}
    picked: list[Candidate] = []
    scores: list[float] = []
    for cid, score in ranking:
        if cid not in by_id or not isinstance(score, int | float) or not math.isfinite(score):
            raise ValueError(f"rerank ranking has an unknown id or a bad score: {cid!r}, {score!r}")
        picked.append(by_id[cid])
        scores.append(float(score))
    return order_by_scores(picked, scores)


CrossEncoderLike = BaseDocumentCompressor | PairScorer | Reranker


def reranker_from_policy(
    config: RerankerConfig,
    *,
    ledger: QuotaLedger | None = None,
    cache: Cache | None = None,
    cross_encoder: CrossEncoderLike | None = None,
    cohere: Reranker | None = None,
    env: Mapping[str, str] = os.environ,
    cache_ttl_s: int | None = None,
) -> Reranker:
    """The floor ``config.provider`` names (``cohere``: the z-score floor under a Cohere
    ceiling), under a :class:`CeilingReranker` unless ``ceiling: none``; without eval lift the
    ceiling is there but disabled, so every turn says ``no-eval-lift`` and why."""
    if config.provider == "identity":
        floor: Reranker = IdentityReranker()
    elif config.provider == "cross-encoder":
        floor = _cross_encoder(cross_encoder, ZScoreReranker())
    else:
        floor = ZScoreReranker()
    ceiling_name = "cohere" if config.provider == "cohere" else config.ceiling
    if ceiling_name == "none":
        return floor
    if ceiling_name == "cohere":
        ceiling = cohere or CohereReranker(floor=floor, env=env)
    else:
        ceiling = _cross_encoder(cross_encoder, floor)
    blocked = None
    if config.require_eval_lift:
        setting = "reranker.ceiling_eval_artifact"
        evidence = read_eval_evidence(config.ceiling_eval_artifact, setting=setting)
        if not evidence.allowed:
            blocked = evidence.note
            logger.info("rerank ceiling %r disabled: %s", ceiling.name, blocked)
    return CeilingReranker(
        ceiling,
        floor,
        config,
        ledger,
        cache,
        disabled_reason=None if blocked is None else "no-eval-lift",
        disabled_note=blocked,
        cache_ttl_s=cache_ttl_s,
    )


def _cross_encoder(model: CrossEncoderLike | None, floor: Reranker) -> Reranker:
    if model is None:
        raise ConfigurationError(
            "the policy asks for the cross-encoder reranker but no model was given; pass "
            "cross_encoder= (a LangChain BaseDocumentCompressor or a sentence-transformers "
            "CrossEncoder, from pip install 'ragtiller[export]')"
        )
    if isinstance(model, BaseDocumentCompressor | PairScorer):
        return CrossEncoderReranker(model, floor=floor)
    return model
