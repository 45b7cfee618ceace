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
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from typing import Any, TypeVar

from langgraph._internal._runnable import RunnableCallable

T = TypeVar("T")

_loop: asyncio.AbstractEventLoop | None = None
_lock = threading.Lock()


def _background_loop() -> asyncio.AbstractEventLoop:
    global _loop
    with _lock:
        if _loop is None:
            loop = asyncio.new_event_loop()
            threading.Thread(
                target=loop.run_forever, name="ragtiller-sync-loop", daemon=True
            ).start()
            _loop = loop
    return _loop


def run_sync(coro_fn: Callable[..., Coroutine[Any, Any, T]], *args: Any) -> T:
    """Run ``coro_fn(*args)`` to completion from synchronous code, in the caller's context."""
    loop = _background_loop()
    context = contextvars.copy_context()
    result: Future[T] = Future()

    def start() -> None:
        task: asyncio.Task[T] = loop.create_task(coro_fn(*args), context=context)
        task.add_done_callback(settle)

    def settle(task: asyncio.Task[T]) -> None:
        error = task.exception()
        if error is not None:
            result.set_exception(error)
        else:
            result.set_result(task.result())

    loop.call_soon_threadsafe(start)
    return result.result()


def dual(
    afunc: Callable[[Any], Coroutine[Any, Any, dict[str, Any]]], name: str
) -> RunnableCallable:
    """A node runnable with a native async path and a sync path through :func:`run_sync`."""

    def func(state: Any) -> dict[str, Any]:
        return run_sync(afunc, state)

    # LangGraph's own node wrapper (what ``add_node`` makes of a plain function): no per-call
    # tracing or signature inspection, unlike ``RunnableLambda``.
    return RunnableCallable(func, afunc, name=name, trace=False)
