"""Contract suites a tier, store or embedder author subclasses in their own tests (pytest), with
the ``make_*`` fixture that makes theirs (``docs/usage.md``, "Check your own tier, store or
embedder"); the store suites need no pytest-asyncio and close every store they are given."""

from __future__ import annotations

from ragtiller.testing.cache import CacheContract, CacheFactory, CacheOutageContract
from ragtiller.testing.embedders import EmbedderContract, EmbedderFactory
from ragtiller.testing.quota import LedgerFactory, QuotaLedgerContract, QuotaLedgerOutageContract
from ragtiller.testing.tiers import TierContract, TierFactory, contract_corpus

__all__ = (
    "CacheContract",
    "CacheFactory",
    "CacheOutageContract",
    "EmbedderContract",
    "EmbedderFactory",
    "LedgerFactory",
    "QuotaLedgerContract",
    "QuotaLedgerOutageContract",
    "TierContract",
    "TierFactory",
    "contract_corpus",
)
