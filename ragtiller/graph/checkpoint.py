"""Checkpointing a ragtiller graph: which of its types a checkpoint may restore."""

from __future__ import annotations

from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

CHECKPOINT_TYPES: tuple[tuple[str, str], ...] = (("ragtiller.manifest", "RunManifest"),)
"""(module, class) pairs in a turn's state beyond plain data and LangChain documents."""


def checkpoint_serde() -> JsonPlusSerializer:
    """A serializer that restores the run manifest from checkpoints.

    LangGraph logs a warning for every unregistered type it reads back (and plans to refuse
    them); pass this to your checkpointer.

    Example:
        >>> from langgraph.checkpoint.memory import InMemorySaver
        >>> saver = InMemorySaver(serde=checkpoint_serde())
    """
    return JsonPlusSerializer(allowed_msgpack_modules=list(CHECKPOINT_TYPES))
