"""Run ``async def`` nodes from the sync API (``invoke``/``stream``) as well as the async one.

Nodes are written once, as coroutines. For ``invoke``/``stream`` each coroutine runs on one
private event loop in a daemon thread, inside a copy of the caller's context, so LangGraph's
config and stream writer (context variables) still reach the node. This also works where the
calling thread already runs a loop (Jupyter), where ``asyncio.run`` would refuse.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from typing import Any, TypeVar

from langchain_core.runnables import RunnableLambda

T = TypeVar("T")

_loop: asyncio.AbstractEventLoop | None = None
_lock = threading.Lock()


def _background_loop() -> asyncio.AbstractEventLoop:
    global _loop
    with _lock:
        if _loop is None:
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="ragtiller-sync-loop", daemon=True).start()
            _loop = loop
    return _loop


def run_sync(coro_fn: Callable[..., Awaitable[T]], *args: Any) -> T:
    """Run ``coro_fn(*args)`` to completion from synchronous code, in the caller's context."""
    loop = _background_loop()
    context = contextvars.copy_context()
    result: Future[T] = Future()

    def start() -> None:
        task = loop.create_task(coro_fn(*args), context=context)  # type: ignore[arg-type]
        task.add_done_callback(
            lambda t: result.set_exception(t.exception())  # type: ignore[arg-type]
            if t.exception() is not None
            else result.set_result(t.result())
        )

    loop.call_soon_threadsafe(start)
    return result.result()


def dual(afunc: Callable[[Any], Awaitable[dict[str, Any]]], name: str) -> RunnableLambda[Any, dict[str, Any]]:
    """A node runnable with a native async path and a sync path through :func:`run_sync`."""

    def func(state: Any) -> dict[str, Any]:
        return run_sync(afunc, state)

    return RunnableLambda(func, afunc=afunc, name=name)
