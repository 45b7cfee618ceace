"""Contract suites a tier, store or embedder author runs in their own tests (needs pytest).

Subclass :class:`TierContract` with a ``make_tier`` fixture (see :mod:`ragtiller.testing.tiers`),
:class:`QuotaLedgerContract` with ``make_ledger`` and :class:`CacheContract` with ``make_cache``
(see :mod:`ragtiller.testing.stores`), :class:`EmbedderContract` with ``make_embedder`` (see
:mod:`ragtiller.testing.embedders`).
"""

from __future__ import annotations

from ragtiller.testing.embedders import EmbedderContract, EmbedderFactory
from ragtiller.testing.stores import (
    CacheContract,
    CacheFactory,
    CacheOutageContract,
    LedgerFactory,
    QuotaLedgerContract,
    QuotaLedgerOutageContract,
)
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
