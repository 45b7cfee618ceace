"""One Redis endpoint seen through a sync and a truly async client, with uniform errors."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import math
import threading
from collections.abc import Awaitable, Callable, Iterator, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeVar

from ragtiller.core.breaker import CircuitBreaker
from ragtiller.errors import ConfigurationError, StoreOverloaded, StoreUnavailableError

if TYPE_CHECKING:
    import redis
    import redis.asyncio

T = TypeVar("T")

DEFAULT_CONNECT_TIMEOUT_S = 0.25
DEFAULT_SOCKET_TIMEOUT_S = 0.25
"""Timeouts of clients built from a URL, in seconds: ragtiller's commands are O(1) or a short
script, and a frozen Redis must not hang a turn. Raise both for a Redis across regions."""
POOL_SIZE = 50
POOL_WAIT_S = 5.0
"""Connections per built client, and the longest wait for a free one; a call still waiting then
fails as :class:`~ragtiller.errors.StoreOverloaded` (not an outage: the breaker ignores it)."""
POOL_EXHAUSTED = ("No connection available", "Too many connections")  # redis-py's full pools
CLOSE_TIMEOUT_S = 2.0  # longest wait for an asyncio client to close in another thread's loop
LEFT_OPEN = (
    "a Redis store's asyncio client outlived its event loop; "
    "await the store's aclose() before the loop ends"
)

logger = logging.getLogger("ragtiller.stores")


class RedisScript:
    """A Lua script run by SHA (``EVALSHA``), loaded on the first ``NOSCRIPT`` reply."""

    def __init__(self, lua: str) -> None:
        self.lua = lua
        self.sha = hashlib.sha1(lua.encode("utf-8")).hexdigest()

    async def arun(
        self, client: redis.asyncio.Redis, keys: Sequence[str], args: Sequence[str | int]
    ) -> Any:
        from redis.exceptions import NoScriptError

        try:
            return await client.evalsha(self.sha, len(keys), *keys, *args)
        except NoScriptError:
            return await client.eval(self.lua, len(keys), *keys, *args)


class RedisConnection:
    """The sync and asyncio clients a Redis store talks through, behind a circuit breaker; built
    from ``url``, an asyncio client per event loop (redis-py binds connections to their loop), and
    the retries docs/redis.md describes. Clients passed in are the caller's."""

    def __init__(
        self,
        *,
        client: redis.Redis | None = None,
        aclient: redis.asyncio.Redis | None,
        url: str | None,
        connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
        socket_timeout_s: float = DEFAULT_SOCKET_TIMEOUT_S,
        breaker: CircuitBreaker | None = None,
    ) -> None:
        if client is None and aclient is None and not url:
            raise ConfigurationError(
                "a Redis store needs client=, aclient= or url= (for example redis://localhost:6379/0)"
            )
        timeouts = {"connect_timeout_s": connect_timeout_s, "socket_timeout_s": socket_timeout_s}
        for name, value in timeouts.items():
            if not (value > 0 and math.isfinite(value)):
                raise ConfigurationError(
                    f"{name} must be a finite number of seconds > 0, but got {value!r}"
                )
        try:
            import redis
            import redis.asyncio
            import redis.asyncio.retry
            import redis.retry
        except ImportError as e:
            raise ImportError(
                "the Redis stores need the 'redis' package: pip install 'ragtiller[redis]'"
            ) from e
        self._redis: ModuleType = redis
        if url:
            try:  # what building a client parses: a bad URL is configuration, not an outage
                self._redis.connection.parse_url(url)
            except ValueError as e:
                raise ConfigurationError(f"the Redis URL (REDIS_URL) is not valid: {e}") from e
        exceptions = redis.exceptions
        self._errors: tuple[type[BaseException], ...] = (exceptions.RedisError, OSError)
        self._outages = (exceptions.ConnectionError, exceptions.TimeoutError, OSError)
        self.breaker = breaker or CircuitBreaker()
        self._url = url or None
        self._timeouts = {
            "socket_connect_timeout": connect_timeout_s,
            "socket_timeout": socket_timeout_s,
        }
        self._owns_client = client is None and self._url is not None
        self._client = self._build(redis, redis.retry) if self._owns_client else client
        self._aclient = aclient
        self._aclients: dict[asyncio.AbstractEventLoop, redis.asyncio.Redis] = {}
        self._lock = threading.Lock()

    def _build(self, lib: ModuleType, retry: ModuleType) -> Any:
        from redis.backoff import NoBackoff

        assert self._url is not None
        errors = (self._redis.exceptions.ConnectionError,)
        again = retry.Retry(NoBackoff(), 1, supported_errors=errors)
        pool = lib.BlockingConnectionPool.from_url(
            self._url, retry=again, max_connections=POOL_SIZE, timeout=POOL_WAIT_S, **self._timeouts
        )
        return lib.Redis.from_pool(pool)

    def async_client(self) -> redis.asyncio.Redis:
        if self._aclient is not None:
            return self._aclient
        if self._url is None:
            raise ConfigurationError(
                "this Redis store has only a sync client; "
                "pass aclient= or url= to use its async methods"
            )
        loop = asyncio.get_running_loop()
        with self._lock:
            aclient = self._aclients.get(loop)
            if aclient is None:
                for closed in [other for other in self._aclients if other.is_closed()]:
                    logger.warning(LEFT_OPEN)  # nothing runs in a closed loop: left to the GC
                    del self._aclients[closed]
                aclient = self._build(self._redis.asyncio, self._redis.asyncio.retry)
                self._aclients[loop] = aclient
        return aclient

    def call(self, fn: Callable[[redis.Redis], T]) -> T:
        """``fn`` with the sync client, through the breaker (``StoreUnavailableError``)."""
        if self._client is None:
            raise ConfigurationError(
                "this Redis store has only an asyncio client; "
                "pass client= or url= to use its sync methods"
            )
        with self._guarded():
            return fn(self._client)

    async def acall(self, fn: Callable[[redis.asyncio.Redis], Awaitable[T]]) -> T:
        """``await fn`` with the running loop's asyncio client, through the breaker."""
        client = self.async_client()
        with self._guarded():
            return await fn(client)

    @contextlib.contextmanager
    def _guarded(self) -> Iterator[None]:
        if not self.breaker.admit():
            snap = self.breaker.snapshot()
            raise StoreUnavailableError(
                f"Redis circuit open after {snap.consecutive_failures} consecutive failures; "
                f"not called (next probe in {snap.retry_in_s:.2f} s)"
            )
        try:
            yield
        except self._errors as e:
            raise self._failure(e) from e
        except BaseException:
            self.breaker.abandoned()  # a cancellation or a bug says nothing about Redis
            raise
        self.breaker.succeeded()

    def _failure(self, error: BaseException) -> StoreUnavailableError:
        exceptions = self._redis.exceptions
        full = getattr(exceptions, "MaxConnectionsError", ())
        if isinstance(error, full) or (
            isinstance(error, exceptions.ConnectionError) and str(error).startswith(POOL_EXHAUSTED)
        ):
            self.breaker.abandoned()
            return StoreOverloaded(f"Redis overloaded: no pooled connection free in time: {error}")
        if isinstance(error, self._outages):
            self.breaker.failed()
        else:
            self.breaker.succeeded()
        return StoreUnavailableError(f"Redis failed: {type(error).__name__}: {error}")

    def close(self) -> None:
        """Close the built clients (the running loop's asyncio one: :meth:`aclose`)."""
        if self._owns_client and self._client is not None:
            self._client.close()
        try:
            current: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            current = None
        with self._lock:
            others = [(loop, c) for loop, c in self._aclients.items() if loop is not current]
            for loop, _ in others:
                del self._aclients[loop]
        for loop, aclient in others:
            if loop.is_running():
                closing = asyncio.run_coroutine_threadsafe(aclient.aclose(), loop)
                try:
                    closing.result(timeout=CLOSE_TIMEOUT_S)
                except self._errors as e:  # a wait that ran out is an OSError (TimeoutError)
                    logger.warning("could not close a Redis asyncio client: %r", e)
            elif not loop.is_closed() and current is None:
                loop.run_until_complete(aclient.aclose())
            else:
                logger.warning(LEFT_OPEN)

    async def aclose(self) -> None:
        """Close every client this object built, the running loop's asyncio client included."""
        self.close()
        with self._lock:
            aclient = self._aclients.pop(asyncio.get_running_loop(), None)
        if aclient is not None:
            await aclient.aclose()


class Store:
    """What a ledger and a cache tell and close alike (in memory: up, nothing to close)."""

    @property
    def available(self) -> bool:
        """Whether a call made now would reach the store (no breaker open); no I/O."""
        return True

    def close(self) -> None:
        """Close the clients built from ``url`` (inside an event loop: :meth:`aclose`)."""

    async def aclose(self) -> None:
        """Close the clients built from ``url``; await it before the event loop ends."""
        self.close()


class RedisBacked(Store):
    """A store that talks through one :class:`RedisConnection` (``_redis``)."""

    _redis: RedisConnection

    @property
    def available(self) -> bool:
        return self._redis.breaker.available

    @property
    def breaker(self) -> CircuitBreaker:
        """The circuit breaker in front of this store's Redis (share it with the other store)."""
        return self._redis.breaker

    def close(self) -> None:
        self._redis.close()

    async def aclose(self) -> None:
        await self._redis.aclose()
