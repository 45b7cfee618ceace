"""Pick the store backends from the environment: Redis when ``REDIS_URL`` is set, else memory."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping

from ragtiller.core.breaker import CircuitBreaker
from ragtiller.stores._cache import Cache
from ragtiller.stores._cache_memory import MemoryCache
from ragtiller.stores._cache_redis import RedisCache
from ragtiller.stores._quota import QuotaLedger
from ragtiller.stores._quota_memory import MemoryQuotaLedger
from ragtiller.stores._quota_redis import RedisQuotaLedger

logger = logging.getLogger("ragtiller.stores")


def stores_from_env(
    limits: Mapping[str, int],
    *,
    tenant_limits: Mapping[str, int] | None = None,
    timezone: str = "UTC",
    prefix: str = "ragtiller:",
) -> tuple[QuotaLedger, Cache]:
    """The quota ledger and cache this deployment should use.

    With ``REDIS_URL`` set (and not blank), both live in that Redis under ``prefix`` and are shared
    by every replica, behind one :class:`CircuitBreaker` (so a Redis that stopped answering to
    one of them is not called by the other either); otherwise both live in this process. No
    connection is opened here.

    Args:
        limits: Units allowed per day, per quota resource.
        tenant_limits: Units each tenant may spend per day, per quota resource.
        timezone: IANA name of the timezone whose calendar day is the quota window.
        prefix: Start of every Redis key (ignored in memory).

    Returns:
        The ledger and the cache; close them with ``close()`` / ``await aclose()`` when done.

    Raises:
        ConfigurationError: Bad limits or timezone.
        ImportError: ``REDIS_URL`` is set but the ``redis`` package is not installed; the message
            says ``pip install 'ragtiller[redis]'``.

    Example:
        >>> ledger, cache = stores_from_env({"chat_gen": 20})  # REDIS_URL unset: in memory
        >>> type(ledger).__name__, type(cache).__name__
        ('MemoryQuotaLedger', 'MemoryCache')
    """
    url = os.environ.get("REDIS_URL", "").strip()
    if not url:
        logger.info("REDIS_URL not set; quota ledger and cache live in this process")
        return MemoryQuotaLedger(
            limits, tenant_limits=tenant_limits, timezone=timezone
        ), MemoryCache()
    breaker = CircuitBreaker()
    ledger = RedisQuotaLedger(
        limits,
        tenant_limits=tenant_limits,
        url=url,
        prefix=prefix,
        timezone=timezone,
        breaker=breaker,
    )
    logger.info("REDIS_URL set; quota ledger and cache live in Redis under prefix %r", prefix)
    return ledger, RedisCache(url=url, prefix=prefix, breaker=breaker)
