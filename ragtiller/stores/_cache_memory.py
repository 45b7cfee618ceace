"""The in-process cache: a bounded dict of JSON texts with expiry times."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from ragtiller.errors import ConfigurationError
from ragtiller.stores._cache import Cache


class MemoryCache(Cache):
    """A cache for one process: thread-safe and asyncio-safe, never unavailable.

    Entries are stored as JSON text, so the values behave exactly as with :class:`RedisCache`.
    Expired entries are dropped when read; past ``max_entries`` the oldest entry is evicted.

    Example:
        >>> import asyncio
        >>> cache = MemoryCache()
        >>> asyncio.run(cache.aset("k", {"ids": [1, 2]}, ttl_s=60))
        >>> asyncio.run(cache.aget("k"))
        {'ids': [1, 2]}
    """

    def __init__(
        self, *, clock: Callable[[], float] = time.monotonic, max_entries: int = 10_000
    ) -> None:
        """Create an empty cache.

        Args:
            clock: Returns the current time in seconds (monotonic); injectable for TTL tests.
            max_entries: Entries kept at most; the oldest is evicted first.

        Raises:
            ConfigurationError: ``max_entries`` is below 1.
        """
        if max_entries < 1:
            raise ConfigurationError(f"max_entries must be >= 1, but got {max_entries}")
        super().__init__()
        self._clock = clock
        self._max_entries = max_entries
        self._lock = threading.Lock()
        self._entries: dict[str, tuple[float, str]] = {}

    def clear(self) -> None:
        """Remove every entry."""
        with self._lock:
            self._entries.clear()

    async def _aget_text(self, key: str) -> str | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            expires_at, text = entry
            if self._clock() >= expires_at:
                del self._entries[key]
                return None
            return text

    async def _aset_text(self, key: str, text: str, ttl_s: float) -> None:
        with self._lock:
            self._entries.pop(key, None)
            if len(self._entries) >= self._max_entries:
                del self._entries[next(iter(self._entries))]
            self._entries[key] = (self._clock() + ttl_s, text)
