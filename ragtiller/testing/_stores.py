"""What the store contracts share: the stores a test opened."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Generic, Protocol, TypeVar

T = TypeVar("T")


class _Store(Protocol):
    def close(self) -> None: ...

    async def aclose(self) -> None: ...


S = TypeVar("S", bound=_Store)


class Opened(Generic[S]):
    """The stores a test opened through its factory, closed in every event loop it ran."""

    def __init__(self, factory: Callable[..., S], kind: type[Any]) -> None:
        self._factory = factory
        self._kind = kind
        self._made: list[S] = []

    def __call__(self, *args: Any, **kwargs: Any) -> S:
        """A store from the subclass's factory, checked to be a ``kind``."""
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
