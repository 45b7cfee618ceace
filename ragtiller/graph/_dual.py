"""Run ``async def`` nodes from the sync API (``invoke``/``stream``) as well as the async one.

Nodes are written once, as coroutines, and every coroutine runs on one private event loop in a
daemon thread (so async clients bound to a loop, such as ``redis.asyncio``, always see the same
loop), inside a copy of the caller's context, so LangGraph's config and stream writer (context
variables) still reach the node. This also works where the calling thread already runs a loop
(Jupyter), where ``asyncio.run`` would refuse.

A top-level ``invoke``/``stream`` makes one hop to that loop for the whole run
(:func:`invoke_sync`, :func:`stream_sync`): the graph runs its async path there and the
caller's thread waits, or receives the streamed chunks. Otherwise (called from inside another graph or runnable, from
the loop itself, or with a checkpointer that has no async methods) LangGraph's own sync path
runs and each node hops to the loop on its own (:func:`dual`).
"""

from __future__ import annotations

import asyncio
import contextvars
import queue
import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from concurrent.futures import Future
from typing import Any, TypeVar

from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import ensure_config
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.state import CompiledStateGraph

from ragtiller.graph.langgraph_internals import RunnableCallable, inside_pregel

T = TypeVar("T")

_loop: asyncio.AbstractEventLoop | None = None
_loop_thread: threading.Thread | None = None
_lock = threading.Lock()
_END = object()


def _background_loop() -> asyncio.AbstractEventLoop:
    global _loop, _loop_thread
    with _lock:
        if _loop is None:
            loop = asyncio.new_event_loop()
            _loop_thread = threading.Thread(
                target=loop.run_forever, name="ragtiller-sync-loop", daemon=True
            )
            _loop_thread.start()
            _loop = loop
    return _loop


class _Run:
    """One coroutine scheduled on the private loop from another thread; cancellable from there."""

    def __init__(
        self,
        coro: Coroutine[Any, Any, Any],
        on_done: Callable[[asyncio.Task[Any]], None] | None = None,
    ) -> None:
        self.loop = _background_loop()
        self._task: asyncio.Task[Any] | None = None
        context = contextvars.copy_context()

        def start() -> None:
            self._task = self.loop.create_task(coro, context=context)
            if on_done is not None:
                self._task.add_done_callback(on_done)

        self.loop.call_soon_threadsafe(start)

    def cancel(self) -> None:
        """Cancel the task (runs after ``start``: the loop keeps the order of these calls)."""

        def cancel() -> None:
            if self._task is not None:
                self._task.cancel()

        self.loop.call_soon_threadsafe(cancel)


def run_sync(coro_fn: Callable[..., Coroutine[Any, Any, T]], *args: Any, **kwargs: Any) -> T:
    """Run ``coro_fn(*args, **kwargs)`` to completion from synchronous code, in the caller's
    context. If the caller stops waiting (``KeyboardInterrupt``), the task is cancelled."""
    result: Future[T] = Future()

    def settle(task: asyncio.Task[T]) -> None:
        if task.cancelled():
            result.cancel()
        elif (error := task.exception()) is not None:
            result.set_exception(error)
        else:
            result.set_result(task.result())

    run = _Run(coro_fn(*args, **kwargs), settle)
    try:
        return result.result()
    except BaseException:
        run.cancel()
        raise


def iterate_sync(agen: AsyncIterator[T]) -> Iterator[T]:
    """Iterate an async iterator on the private loop, from synchronous code.

    The loop pushes items into a queue as they come, so the run never waits for the consumer's
    thread to wake; closing the iterator early cancels the run.
    """
    items: queue.SimpleQueue[tuple[Any, BaseException | None]] = queue.SimpleQueue()

    async def pump() -> None:
        try:
            async for item in agen:
                items.put((item, None))
        except BaseException as e:  # handed to the consumer, who raises it
            items.put((_END, e))
            if isinstance(e, asyncio.CancelledError):
                raise
            return
        items.put((_END, None))

    run = _Run(pump())
    finished = False
    try:
        while True:
            item, error = items.get()
            if item is _END:
                finished = True
                if error is not None:
                    raise error
                return
            yield item
    finally:
        if not finished:
            run.cancel()


def dual(
    afunc: Callable[[Any], Coroutine[Any, Any, dict[str, Any]]], name: str
) -> RunnableCallable:
    """A node runnable with a native async path and a sync path through :func:`run_sync`."""

    def func(state: Any) -> dict[str, Any]:
        return run_sync(afunc, state)

    # LangGraph's own node wrapper (what ``add_node`` makes of a plain function): no per-call
    # tracing or signature inspection, unlike ``RunnableLambda``.
    return RunnableCallable(func, afunc, name=name, trace=False)


def one_hop(graph: CompiledStateGraph, config: RunnableConfig | None) -> bool:  # type: ignore[type-arg]
    """Whether a sync run of ``graph`` makes one hop to the loop: only a top-level run, off the
    loop's own thread, with async checkpointing."""
    if threading.current_thread() is _loop_thread:
        return False  # waiting for the loop on the loop would deadlock
    saver = graph.checkpointer
    if (
        isinstance(saver, BaseCheckpointSaver)
        and type(saver).aget_tuple is BaseCheckpointSaver.aget_tuple
    ):
        return False  # a sync-only checkpointer (its async methods raise)
    configurable = ensure_config(config).get("configurable", {})
    return not inside_pregel(configurable)


def invoke_sync(
    graph: CompiledStateGraph,  # type: ignore[type-arg]
    input: Any,
    config: RunnableConfig | None,
    **kwargs: Any,
) -> Any:
    """``graph.invoke``, in one hop when :func:`one_hop` allows."""
    if not one_hop(graph, config):
        return graph.invoke(input, config, **kwargs)
    return run_sync(graph.ainvoke, input, config, **kwargs)


def stream_sync(
    graph: CompiledStateGraph,  # type: ignore[type-arg]
    input: Any,
    config: RunnableConfig | None,
    **kwargs: Any,
) -> Iterator[Any]:
    """``graph.stream``, in one hop when :func:`one_hop` allows."""
    if not one_hop(graph, config):
        return graph.stream(input, config, **kwargs)
    return iterate_sync(graph.astream(input, config, **kwargs))
