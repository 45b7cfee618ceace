"""Quota ledgers and caches: in memory by default, in Redis when shared by several replicas.

A quota fails closed (a spend is refused when its store is down); a cache fails open (a miss).
A circuit breaker shared by the Redis ledger and cache stops calling a Redis that keeps failing.
"""

from ragtiller.core.breaker import BreakerSnapshot, BreakerState, CircuitBreaker
from ragtiller.stores._cache import Cache, MemoryCache, cache_key
from ragtiller.stores._cache_redis import RedisCache
from ragtiller.stores._env import stores_from_env
from ragtiller.stores._quota import (
    Budget,
    MemoryQuotaLedger,
    QuotaLedger,
    QuotaSnapshot,
    QuotaWindow,
    SpendRefusal,
    SpendResult,
    UnknownResourceError,
    spend_caps,
)
from ragtiller.stores._quota_redis import RedisQuotaLedger

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
