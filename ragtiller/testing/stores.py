"""The store contracts: what every quota ledger and cache must do for the graph to rely on it.

Subclass :class:`QuotaLedgerContract` with a ``make_ledger`` fixture (a function from limits,
``timezone=`` and ``clock=`` to a ledger over an empty store), and :class:`CacheContract` with a
``make_cache`` fixture (a function of no arguments: a cache over the test's one store, empty at
first; each call may return a new client of that store, or the same object)::

    from ragtiller.testing import CacheContract, QuotaLedgerContract

    class TestMyLedger(QuotaLedgerContract):
        @pytest.fixture
        def make_ledger(self, my_server):
            return lambda limits, **kwargs: MyLedger(limits, server=my_server, **kwargs)

    class TestMyCache(CacheContract):
        @pytest.fixture
        def make_cache(self, my_server):
            return lambda: MyCache(server=my_server)

A store of another process (a server) also subclasses :class:`QuotaLedgerOutageContract` and
:class:`CacheOutageContract`, whose ``make_unreachable_ledger`` / ``make_unreachable_cache``
point at a store that does not answer: quotas must fail closed and caches open, never raise.

Ledgers subclass :class:`ragtiller.stores.QuotaLedger` and caches :class:`ragtiller.stores.Cache`
(the graph takes those). The suite closes each store it was given: ``aclose()`` at the end of
every event loop it ran (each test runs its async calls in one ``asyncio.run``, so pytest-asyncio
is not needed), then ``close()`` at teardown. A cache's TTLs run on real time unless the subclass
overrides ``advance_time`` (a function that lets that many seconds pass for the cache).
"""

from ragtiller.testing.cache import CacheContract, CacheFactory, CacheOutageContract
from ragtiller.testing.quota import LedgerFactory, QuotaLedgerContract, QuotaLedgerOutageContract

__all__ = (
    "CacheContract",
    "CacheFactory",
    "CacheOutageContract",
    "LedgerFactory",
    "QuotaLedgerContract",
    "QuotaLedgerOutageContract",
)
