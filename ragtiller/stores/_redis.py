"""One Redis endpoint seen through a sync and a truly async client, with uniform errors."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import math
import threading
from collections.abc import Awaitable, Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeVar

from ragtiller.core.breaker import CircuitBreaker
from ragtiller.errors import ConfigurationError, StoreOverloaded, StoreUnavailableError

if TYPE_CHECKING:
    import redis
    import redis.asyncio

T = TypeVar("T")

INSTALL_HINT = "the Redis stores need the 'redis' package: pip install 'ragtiller[redis]'"

DEFAULT_CONNECT_TIMEOUT_S = 0.25
"""Connect timeout of clients built from a URL, in seconds (an unreachable Redis must not hang)."""

DEFAULT_SOCKET_TIMEOUT_S = 0.25
"""Read/write timeout of clients built from a URL, in seconds (a frozen Redis must not hang).

Every command ragtiller sends is O(1) or a short script; a Redis on the same host or in the same
zone answers in about a millisecond, so a quarter second is generous there. Raise both for a
Redis reached across regions.
"""

POOL_SIZE = 50
"""Connections per client built from a URL; more concurrent callers wait for a free one."""

POOL_WAIT_S = 5.0
"""Longest wait for a free pooled connection, in seconds; a call still waiting then fails as
:class:`~ragtiller.errors.StoreOverloaded` (not an outage: the breaker does not count it)."""

POOL_EXHAUSTED = ("No connection available", "Too many connections")
"""How redis-py words a full pool: a blocking pool's wait ran out, or a plain pool is full."""

CLOSE_TIMEOUT_S = 2.0
"""Longest wait for an asyncio client to close in an event loop of another thread, in seconds."""

LEFT_OPEN = (
    "a Redis store's asyncio client outlived its event loop; "
    "await the store's aclose() before the loop ends"
)

logger = logging.getLogger("ragtiller.stores")


def import_redis() -> ModuleType:
    """Import ``redis`` (and ``redis.asyncio``) lazily.

    Raises:
        ImportError: The optional dependency is missing; the message says how to install it.
    """
    try:
        import redis
        import redis.asyncio
    except ImportError as e:
        raise ImportError(INSTALL_HINT) from e
    return redis


class RedisScript:
    """A Lua script run by SHA (``EVALSHA``), loaded on the first ``NOSCRIPT`` reply."""

    def __init__(self, lua: str) -> None:
        """Hold ``lua`` and its SHA-1, the name Redis caches it under."""
        self.lua = lua
        self.sha = hashlib.sha1(lua.encode("utf-8")).hexdigest()

    def run(self, client: redis.Redis, keys: list[str], args: list[str | int]) -> Any:
        """Run the script with a sync client."""
        from redis.exceptions import NoScriptError

        try:
            return client.evalsha(self.sha, len(keys), *keys, *args)
        except NoScriptError:
            return client.eval(self.lua, len(keys), *keys, *args)

    async def arun(
        self, client: redis.asyncio.Redis, keys: list[str], args: list[str | int]
    ) -> Any:
        """Run the script with an asyncio client."""
        from redis.exceptions import NoScriptError

        try:
            return await client.evalsha(self.sha, len(keys), *keys, *args)
        except NoScriptError:
            return await client.eval(self.lua, len(keys), *keys, *args)


class RedisConnection:
    """The sync and asyncio clients a Redis store talks through.

    Clients passed in belong to the caller and are never closed here. Clients built from ``url``
    belong to this object: the sync one is shared by all threads; an asyncio client is built per
    event loop (redis-py connections are bound to the loop that opened them) and is closed by
    :meth:`aclose` in that loop, or by :meth:`close` from another thread. Built clients use a
    blocking pool of ``POOL_SIZE`` connections, short connect and socket timeouts and a single
    immediate retry on a connection error (which replaces a pooled connection that died with a
    restarted server); a timeout is not retried, so a frozen server costs one timeout per call.

    Every call goes through a :class:`CircuitBreaker`: connection errors and timeouts count as
    failures; while the breaker is open, calls raise :class:`StoreUnavailableError` at once.
    A full connection pool is not an outage: the call fails as :class:`StoreOverloaded` and
    the breaker does not count it.
    """

    def __init__(
        self,
        *,
        client: redis.Redis | None,
        aclient: redis.asyncio.Redis | None,
        url: str | None,
        connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
        socket_timeout_s: float = DEFAULT_SOCKET_TIMEOUT_S,
        breaker: CircuitBreaker | None = None,
    ) -> None:
        """Adopt the given clients, or prepare to build them from ``url``.

        Args:
            client: A sync client; its own timeouts apply.
            aclient: A ``redis.asyncio`` client; its own timeouts apply.
            url: Builds the clients not given.
            connect_timeout_s: Connect timeout of built clients, in seconds.
            socket_timeout_s: Read/write timeout of built clients, in seconds.
            breaker: Shared with the other stores of the same Redis; default: one of its own.

        Raises:
            ConfigurationError: None of ``client``, ``aclient`` and ``url`` was given, ``url``
                is not a Redis URL, or a timeout is not a finite number > 0.
            ImportError: The ``redis`` package is not installed.
        """
        if client is None and aclient is None and not url:
            raise ConfigurationError(
                "a Redis store needs client=, aclient= or url= (for example redis://localhost:6379/0)"
            )
        for name, value in (
            ("connect_timeout_s", connect_timeout_s),
            ("socket_timeout_s", socket_timeout_s),
        ):
            if not (value > 0 and math.isfinite(value)):
                raise ConfigurationError(
                    f"{name} must be a finite number of seconds > 0, but got {value!r}"
                )
        self._redis = import_redis()
        if url:
            try:  # what building a client parses: a bad URL is configuration, not an outage
                self._redis.connection.parse_url(url)
            except ValueError as e:
                raise ConfigurationError(f"the Redis URL (REDIS_URL) is not valid: {e}") from e
        exceptions = self._redis.exceptions
        self._errors: tuple[type[BaseException], ...] = (exceptions.RedisError, OSError)
        self._outages: tuple[type[BaseException], ...] = (
            exceptions.ConnectionError,
            exceptions.TimeoutError,
            OSError,
        )
        self.breaker = breaker or CircuitBreaker()
        self._url = url or None
        self._connect_timeout_s = connect_timeout_s
        self._timeout_s = socket_timeout_s
        self._client = client
        self._owns_client = False
        if client is None and self._url is not None:
            self._client = self._build_client(self._url)
            self._owns_client = True
        self._aclient = aclient
        self._aclients: dict[asyncio.AbstractEventLoop, redis.asyncio.Redis] = {}
        self._lock = threading.Lock()

    def _build_client(self, url: str) -> redis.Redis:
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        retry = Retry(NoBackoff(), 1, supported_errors=(self._redis.exceptions.ConnectionError,))
        pool = self._redis.BlockingConnectionPool.from_url(url, retry=retry, **self._pool_options())
        client: redis.Redis = self._redis.Redis.from_pool(pool)
        return client

    def _build_aclient(self, url: str) -> redis.asyncio.Redis:
        from redis.asyncio.retry import Retry
        from redis.backoff import NoBackoff

        retry = Retry(NoBackoff(), 1, supported_errors=(self._redis.exceptions.ConnectionError,))
        pool = self._redis.asyncio.BlockingConnectionPool.from_url(
            url, retry=retry, **self._pool_options()
        )
        client: redis.asyncio.Redis = self._redis.asyncio.Redis.from_pool(pool)
        return client

    def _pool_options(self) -> dict[str, Any]:
        return {
            "max_connections": POOL_SIZE,
            "timeout": POOL_WAIT_S,
            "socket_connect_timeout": self._connect_timeout_s,
            "socket_timeout": self._timeout_s,
        }

    def sync_client(self) -> redis.Redis:
        """The sync client.

        Raises:
            ConfigurationError: The store was given only ``aclient=``.
        """
        if self._client is None:
            raise ConfigurationError(
                "this Redis store has only an asyncio client; "
                "pass client= or url= to use its sync methods"
            )
        return self._client

    def async_client(self) -> redis.asyncio.Redis:
        """The asyncio client for the running event loop.

        Raises:
            ConfigurationError: The store was given only ``client=``.
        """
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
                self._forget_closed_loops()
                aclient = self._aclients[loop] = self._build_aclient(self._url)
        return aclient

    def _forget_closed_loops(self) -> None:
        """Drop the clients of loops that ended without :meth:`aclose` (call with the lock held).

        Nothing can run in a closed loop, so their connections are left to the garbage collector.
        """
        for loop in [loop for loop in self._aclients if loop.is_closed()]:
            logger.warning(LEFT_OPEN)
            del self._aclients[loop]

    @property
    def available(self) -> bool:
        """Whether a call made now would reach Redis (the breaker is not open); no I/O."""
        return self.breaker.available

    def call(self, fn: Callable[[redis.Redis], T]) -> T:
        """Run ``fn`` with the sync client, through the breaker.

        Raises:
            StoreUnavailableError: The breaker is open, or Redis failed (connection, timeout,
                server error).
        """
        client = self.sync_client()
        self._admit()
        try:
            result = fn(client)
        except self._errors as e:
            raise self._failure(e) from e
        except BaseException:
            self.breaker.abandoned()  # a cancellation or a bug says nothing about Redis
            raise
        self.breaker.succeeded()
        return result

    async def acall(self, fn: Callable[[redis.asyncio.Redis], Awaitable[T]]) -> T:
        """Await ``fn`` with the asyncio client of the running loop, through the breaker.

        Raises:
            StoreUnavailableError: The breaker is open, or Redis failed (connection, timeout,
                server error).
        """
        client = self.async_client()
        self._admit()
        try:
            result = await fn(client)
        except self._errors as e:
            raise self._failure(e) from e
        except BaseException:
            self.breaker.abandoned()  # a cancellation or a bug says nothing about Redis
            raise
        self.breaker.succeeded()
        return result

    def _admit(self) -> None:
        if not self.breaker.admit():
            snap = self.breaker.snapshot()
            raise StoreUnavailableError(
                f"Redis circuit open after {snap.consecutive_failures} consecutive failures; "
                f"not called (next probe in {snap.retry_in_s:.2f} s)"
            )

    def _failure(self, error: BaseException) -> StoreUnavailableError:
        """Tell the breaker how a call that raised ``error`` ended; the error to raise instead.

        A connection error or timeout is a failure; an error reply proves Redis is up; a full
        connection pool says nothing about Redis (this process has more calls than connections).
        """
        if _pool_exhausted(error, self._redis):
            self.breaker.abandoned()
            return StoreOverloaded(f"Redis overloaded: no pooled connection free in time: {error}")
        if isinstance(error, self._outages):
            self.breaker.failed()
        else:
            self.breaker.succeeded()
        return StoreUnavailableError(f"Redis failed: {type(error).__name__}: {error}")

    def close(self) -> None:
        """Close the clients this object built, except the asyncio one of a loop running here.

        An asyncio client whose loop runs in another thread is closed in that loop (waiting up to
        ``CLOSE_TIMEOUT_S``); one whose loop is stopped is closed by running that loop. Inside a
        running loop, use :meth:`aclose`, which also closes that loop's client.
        """
        if self._owns_client and self._client is not None:
            self._client.close()
        current = _running_loop()
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


def _pool_exhausted(error: BaseException, redis: ModuleType) -> bool:
    """Whether ``error`` is redis-py saying that no pooled connection came free."""
    exceptions = redis.exceptions
    full = getattr(exceptions, "MaxConnectionsError", ())
    return isinstance(error, full) or (
        isinstance(error, exceptions.ConnectionError) and str(error).startswith(POOL_EXHAUSTED)
    )


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class RedisBacked:
    """What a store that talks through one :class:`RedisConnection` (``_redis``) tells and
    closes the same way: the cache and the quota ledger."""

    _redis: RedisConnection

    @property
    def available(self) -> bool:
        """Whether a call made now would reach Redis (its breaker is not open); no I/O."""
        return self._redis.available

    @property
    def breaker(self) -> CircuitBreaker:
        """The circuit breaker in front of this store's Redis (share it with the other store)."""
        return self._redis.breaker

    def close(self) -> None:
        """Close the clients built from ``url`` (inside an event loop: :meth:`aclose`)."""
        self._redis.close()

    async def aclose(self) -> None:
        """Close the clients built from ``url``; await it before the event loop ends."""
        await self._redis.aclose()
