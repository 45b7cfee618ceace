"""Checkpointing a ragtiller graph: its checkpoints hold plain data only.

LangGraph's serializer logs a warning for every class it reads back that it does not know
(pydantic models included), and its strict mode (``LANGGRAPH_STRICT_MSGPACK=true``) refuses
them. A turn's state is ``TypedDict``s, LangChain documents and messages, which it knows; the
one model, the run manifest, lives in a :class:`ManifestValue` channel that saves its JSON dict.
So any checkpointer works as it comes, with no serializer to configure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Self

from langgraph.channels.last_value import LastValue
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from ragtiller.core.run_manifest import RunManifest
from ragtiller.errors import InputError

CHECKPOINT_TYPES: tuple[tuple[str, str], ...] = (("ragtiller.core.run_manifest", "RunManifest"),)
"""(module, class) pairs a parent graph's own state may hold beyond plain data and documents."""


class PlainManifest(dict[str, Any]):
    """A manifest's JSON dict that still holds the model it was dumped from: checkpoints and
    ``updates`` events carry the plain dict (msgpack writes a dict subclass as a dict), and the
    channel hands nodes and callers the model without validating it again."""

    __slots__ = ("model",)

    def __init__(self, model: RunManifest) -> None:
        super().__init__(model.model_dump(mode="json"))
        self.model = model


def plain_manifest(value: RunManifest | dict[str, Any]) -> dict[str, Any]:
    """The manifest as its JSON dict (what a checkpoint and an ``updates`` event carry)."""
    if isinstance(value, RunManifest):
        return value.model_dump(mode="json")
    return dict(value)


class ManifestValue(LastValue[Any]):
    """The ``manifest`` channel: a :class:`~ragtiller.core.run_manifest.RunManifest` to nodes and
    callers, its JSON dict in checkpoints.

    It takes a model or its JSON dict (assemble writes a :class:`PlainManifest`, so the task
    writes LangGraph saves are plain too). A dict read back from a checkpoint, or written by
    ``update_state``, is validated into the model once, on the first read. None empties it.
    """

    __slots__ = ("model",)

    model: RunManifest | None

    def __init__(self, typ: Any = RunManifest, key: str = "") -> None:
        super().__init__(typ, key)
        self.model = None

    def copy(self) -> Self:
        empty = super().copy()
        empty.model = self.model
        return empty

    def update(self, values: Sequence[RunManifest | dict[str, Any] | None]) -> bool:
        if not super().update(values):
            return False
        written = values[-1]
        if written is None:  # the gate starts a turn: no manifest until assemble writes one
            self.value, self.model = type(self)().value, None
            return True
        self.model = (
            written if isinstance(written, RunManifest) else getattr(written, "model", None)
        )
        self.value = plain_manifest(written)
        return True

    def get(self) -> RunManifest:
        if self.model is None:
            self.model = RunManifest.model_validate(super().get())
        return self.model


class ScopeValue(LastValue[Any]):
    """The ``scope`` channel: a thread's sealed scope (:mod:`ragtiller.nodes.scope`).

    It refuses a write that is not a mapping, None above all: ``update_state`` could otherwise
    erase a thread's scope, and the thread would take a turn of any other scope and hand it the
    thread's answers. Any other value it keeps; the graph's input step refuses the thread's next
    turn when the value's seal does not verify.
    """

    __slots__ = ()

    def update(self, values: Sequence[Any]) -> bool:
        if any(not isinstance(value, Mapping) for value in values):
            raise InputError(
                "a thread's scope can be written only by its turns, and never erased; "
                "use a new thread_id"
            )
        return super().update(values)


def checkpoint_serde() -> JsonPlusSerializer:
    """A serializer that also restores a run manifest a parent graph's own state holds.

    The retrieval graph's checkpoints need none (see :class:`ManifestValue`). A parent whose
    state keeps the manifest it got from ragtiller, as a plain field, checkpoints the model;
    LangGraph logs a warning when it reads one back unless its serializer names the type.

    Example:
        >>> from langgraph.checkpoint.memory import InMemorySaver
        >>> saver = InMemorySaver(serde=checkpoint_serde())
    """
    return JsonPlusSerializer(allowed_msgpack_modules=list(CHECKPOINT_TYPES))
