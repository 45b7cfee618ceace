"""What ``build_graph`` returns, and the sync path: coroutines run on one private loop thread (so
loop-bound clients see one loop, and Jupyter's is no obstacle), one hop per top-level run."""

from __future__ import annotations

import asyncio
import contextvars
import queue
import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Mapping
from concurrent.futures import Future
from typing import Any, TypeVar, cast

from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.runnables.config import ensure_config, merge_configs
from langchain_core.runnables.graph import Graph
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.state import CompiledStateGraph
from pydantic import BaseModel

from ragtiller.graph.langgraph_internals import Untraced, inside_pregel
from ragtiller.nodes.run_input import check_keys, current_context
from ragtiller.nodes.scope import asked_scope, check_thread_scope
from ragtiller.policies.run_context import CONFIG_KEY, RunContext, context_from, pinned

T = TypeVar("T")

_loop: asyncio.AbstractEventLoop | None = None
_loop_thread: threading.Thread | None = None
_lock = threading.Lock()
_END = object()
THREAD_READS = ("scope",)  # the thread's channels check_turn_input reads


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


def _submit(
    coro: Coroutine[Any, Any, Any], on_done: Callable[[asyncio.Task[Any]], None] | None = None
) -> Callable[[], object]:
    """Schedule ``coro`` on the private loop, in the caller's context; returns its cancel."""
    loop = _background_loop()
    context = contextvars.copy_context()
    tasks: list[asyncio.Task[Any]] = []

    def start() -> None:
        tasks.append(loop.create_task(coro, context=context))
        if on_done is not None:
            tasks[0].add_done_callback(on_done)

    def cancel() -> None:
        for task in tasks:
            task.cancel()

    loop.call_soon_threadsafe(start)
    return lambda: loop.call_soon_threadsafe(cancel)


def run_sync(coro_fn: Callable[..., Coroutine[Any, Any, T]], *args: Any, **kwargs: Any) -> T:
    """``coro_fn(*args, **kwargs)`` from sync code; cancelled if the caller stops waiting."""
    result: Future[T] = Future()

    def settle(task: asyncio.Task[T]) -> None:
        if task.cancelled():
            result.cancel()
        elif (error := task.exception()) is not None:
            result.set_exception(error)
        else:
            result.set_result(task.result())

    cancel = _submit(coro_fn(*args, **kwargs), settle)
    try:
        return result.result()
    except BaseException:
        cancel()
        raise


def iterate_sync(agen: AsyncIterator[T]) -> Iterator[T]:
    """``agen`` run on the private loop into a queue; closing the iterator early cancels it."""
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

    cancel = _submit(pump())
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
            cancel()


def dual(afunc: Callable[[Any], Coroutine[Any, Any, dict[str, Any]]], name: str) -> Untraced:

    def func(state: Any) -> dict[str, Any]:
        return run_sync(afunc, state)

    return Untraced(func, afunc, name)


def one_hop(graph: CompiledStateGraph, config: RunnableConfig | None) -> bool:  # type: ignore[type-arg]
    """Only a top-level run, off the loop's thread, with async checkpointing, makes one hop."""
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


def check_turn_input(input: Any, thread: Mapping[str, Any], pin: RunContext | None = None) -> None:
    """Refuse a dropped key, a changed pin or another scope before anything is written."""
    check_keys(input)
    context = pinned(pin, current_context(), input)
    previous = thread.get("scope")
    if previous is not None:
        check_thread_scope(previous, asked_scope(input, context))


FORWARDED = frozenset(
    {
        "get_context_jsonschema",
        *(
            f"{prefix}{call}"
            for prefix in ("", "a")
            for call in ("get_state", "update_state", "get_state_history", "bulk_update_state")
        ),
    }
)


class RetrievalGraph(Runnable[dict[str, Any], dict[str, Any]]):
    """The retrieval graph; ``.graph`` is the compiled LangGraph graph it passes calls to."""

    def __init__(
        self,
        graph: CompiledStateGraph[Any, Any, Any, Any],
        pinning: Callable[[RunContext], RetrievalGraph],
    ) -> None:
        self.graph = graph
        self.name = graph.name
        self._pinning = pinning

    def invoke(
        self, input: dict[str, Any] | Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        if not one_hop(self.graph, config):
            return cast(dict[str, Any], self.graph.invoke(input, config, **kwargs))
        return cast(dict[str, Any], run_sync(self.graph.ainvoke, input, config, **kwargs))

    async def ainvoke(
        self, input: dict[str, Any] | Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        return cast(dict[str, Any], await self.graph.ainvoke(input, config, **kwargs))

    def stream(
        self, input: dict[str, Any] | Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> Iterator[Any]:
        if not one_hop(self.graph, config):
            return self.graph.stream(input, config, **kwargs)
        return iterate_sync(self.graph.astream(input, config, **kwargs))

    def astream(
        self, input: dict[str, Any] | Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> AsyncIterator[Any]:
        return self.graph.astream(input, config, **kwargs)

    def astream_events(  # type: ignore[override]
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> AsyncIterator[Any]:
        return cast(AsyncIterator[Any], self.graph.astream_events(input, config, **kwargs))

    def with_config(self, config: RunnableConfig | None = None, **kwargs: Any) -> RetrievalGraph:
        """Fields under ``configurable["ragtiller"]`` are pinned: set differently, refused."""
        merged = merge_configs(config, cast(RunnableConfig, kwargs))
        configurable = dict(merged.get("configurable") or {})
        settings = configurable.pop(CONFIG_KEY, None)
        rest = cast(RunnableConfig, {**merged, "configurable": configurable})
        if settings is None:
            return RetrievalGraph(self.graph.with_config(rest), self._pinning)
        held = self._pinning(context_from(None, {CONFIG_KEY: settings}))
        bound = held.graph.with_config(merge_configs(self.graph.config, rest))
        return RetrievalGraph(bound, held._pinning)

    def __getattr__(self, name: str) -> Any:
        """The thread-state calls (``get_state``, ``update_state``, ...) and the context schema
        as LangGraph's; only those, so the facade never passes for a compiled graph."""
        if name not in FORWARDED:
            raise AttributeError(name)
        return getattr(self.graph, name)

    def get_graph(self, config: RunnableConfig | None = None, *, xray: int | bool = False) -> Graph:
        return self.graph.get_graph(config, xray=xray)

    def get_input_schema(self, config: RunnableConfig | None = None) -> type[BaseModel]:
        return self.graph.get_input_schema(config)

    def get_output_schema(self, config: RunnableConfig | None = None) -> type[BaseModel]:
        return self.graph.get_output_schema(config)

    def get_input_jsonschema(self, config: RunnableConfig | None = None) -> dict[str, Any]:
        return self.graph.get_input_jsonschema(config)

    def get_output_jsonschema(self, config: RunnableConfig | None = None) -> dict[str, Any]:
        return self.graph.get_output_jsonschema(config)
