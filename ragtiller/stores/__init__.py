"""Quota ledgers and caches, in memory or in Redis (shared by replicas, behind one circuit
breaker): a quota fails closed (a spend is refused when its store is down), a cache open."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping

from ragtiller.core.breaker import BreakerSnapshot, BreakerState, CircuitBreaker
from ragtiller.stores._cache import Cache, MemoryCache, RedisCache, cache_key
from ragtiller.stores._quota import (
    Budget,
    MemoryQuotaLedger,
    QuotaLedger,
    QuotaSnapshot,
    QuotaWindow,
    RedisQuotaLedger,
    SpendRefusal,
    SpendResult,
    UnknownResourceError,
    spend_caps,
)

logger = logging.getLogger("ragtiller.stores")

__all__ = (
    "BreakerSnapshot",
    "BreakerState",
    "Budget",
    "Cache",
    "CircuitBreaker",
    "MemoryCache",
    "MemoryQuotaLedger",
    "QuotaLedger",
    "QuotaSnapshot",
    "QuotaWindow",
    "RedisCache",
    "RedisQuotaLedger",
    "SpendRefusal",
    "SpendResult",
    "UnknownResourceError",
    "cache_key",
    "spend_caps",
    "stores_from_env",
)


def stores_from_env(
    limits: Mapping[str, int],
    *,
    tenant_limits: Mapping[str, int] | None = None,
    timezone: str = "UTC",
    prefix: str = "ragtiller:",
) -> tuple[QuotaLedger, Cache]:
    """The quota ledger and cache of this deployment, with daily ``limits`` (and each
    tenant's own): with ``REDIS_URL`` set, both in that Redis under ``prefix``, shared by every
    replica, behind one :class:`CircuitBreaker` (a Redis that stopped answering one is not
    called by the other); otherwise both in this process. No connection is opened here.

    Example:
        >>> ledger, cache = stores_from_env({"chat_gen": 20})  # REDIS_URL unset: in memory
        >>> type(ledger).__name__, type(cache).__name__
        ('MemoryQuotaLedger', 'MemoryCache')
    """
    url = os.environ.get("REDIS_URL", "").strip()
    if not url:
        logger.info("REDIS_URL not set; quota ledger and cache live in this process")
        memory = MemoryQuotaLedger(limits, tenant_limits=tenant_limits, timezone=timezone)
        return memory, MemoryCache()
    breaker = CircuitBreaker()
    ledger = RedisQuotaLedger(
        limits,
        url=url,
        prefix=prefix,
        breaker=breaker,
        tenant_limits=tenant_limits,
        timezone=timezone,
    )
    logger.info("REDIS_URL set; quota ledger and cache live in Redis under prefix %r", prefix)
    return ledger, RedisCache(url=url, prefix=prefix, breaker=breaker)
