"""What the contracts share: required fixtures, and the stores a test opened, closed after."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, Generic, NoReturn, TypeVar

import pytest

from ragtiller.stores import Cache, QuotaLedger

T = TypeVar("T")
S = TypeVar("S", bound=Cache | QuotaLedger)


class Opened(Generic[S]):
    """The stores a test opened through its factory, checked to be a ``kind``."""

    def __init__(self, factory: Callable[..., S], kind: type[Any]) -> None:
        self._factory = factory
        self._kind = kind
        self._made: list[S] = []

    def __call__(self, *args: Any, **kwargs: Any) -> S:
        store = self._factory(*args, **kwargs)
        assert isinstance(store, self._kind), (
            f"the factory must return a {self._kind.__module__}.{self._kind.__name__}, "
            f"but returned {type(store).__name__}"
        )
        if all(store is not seen for seen in self._made):
            self._made.append(store)
        return store

    def run(self, main: Callable[[], Awaitable[T]]) -> T:
        """``main()`` in a new event loop, whose asyncio clients are closed before it ends."""

        async def closing() -> T:
            try:
                return await main()
            finally:
                for store in self._made:
                    await store.aclose()

        return asyncio.run(closing())

    def close(self) -> None:
        """Close every store opened (the sync clients; each loop's were closed in that loop)."""
        for store in self._made:
            store.close()


def in_loop(test: Callable[..., Awaitable[None]]) -> Callable[..., None]:
    """An async contract test, run in one event loop of the stores (an :class:`Opened`) it asks."""

    @functools.wraps(test)
    def run(self: object, **fixtures: Any) -> None:
        stores = next(v for v in fixtures.values() if isinstance(v, Opened))
        stores.run(lambda: test(self, **fixtures))

    return run


def required(name: str, contract: str) -> Any:
    """The fixture ``name`` a subclass of ``contract`` must define (until then, it fails)."""

    @pytest.fixture(name=name)
    def missing(self: object) -> NoReturn:
        raise NotImplementedError(f"define a {name} fixture in your {contract} subclass")

    return missing


def opened(factory: str, kind: type[Any]) -> Any:
    """A fixture: the stores a test opens through the fixture ``factory``, closed at teardown."""

    @pytest.fixture
    def stores(self: object, request: pytest.FixtureRequest) -> Iterator[Opened[Any]]:
        made: Opened[Any] = Opened(request.getfixturevalue(factory), kind)
        yield made
        made.close()

    return stores
