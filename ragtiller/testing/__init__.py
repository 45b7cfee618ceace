"""Contract suites a tier, store or embedder author subclasses in their own tests (pytest),
with the fixture that makes theirs: :class:`TierContract` (``make_tier``),
:class:`QuotaLedgerContract` (``make_ledger``), :class:`CacheContract` (``make_cache``), the
``Outage`` twins for a store of another process (a store that does not answer: quotas must
fail closed, caches open), and :class:`EmbedderContract` (``make_embedder``). See
``docs/usage.md``, "Check your own tier, store or embedder".

The store suites run each test's async calls in ``asyncio.run`` (no pytest-asyncio), awaiting
``aclose()`` of every store they were given before each loop ends and ``close()`` at teardown.
"""

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
