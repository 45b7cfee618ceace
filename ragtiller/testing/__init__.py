"""Contract suites a tier author runs in their own tests (needs pytest).

Subclass :class:`TierContract` with a ``make_tier`` fixture; see :mod:`ragtiller.testing.tiers`.
"""

from __future__ import annotations

from ragtiller.testing.tiers import TierContract, TierFactory, contract_corpus

__all__ = ("TierContract", "TierFactory", "contract_corpus")
