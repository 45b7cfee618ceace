"""Facts about any provider object (a chat model, an embedder), and how to call a chat model."""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import Runnable

from ragtiller.core.bulkhead import bulkhead_for, within


def model_label(provider: object) -> str:
    """The provider's ``model_name`` or ``model``, else its class name.

    Example:
        >>> from langchain_core.embeddings import DeterministicFakeEmbedding
        >>> model_label(DeterministicFakeEmbedding(size=3))
        'DeterministicFakeEmbedding'
    """
    for attr in ("model_name", "model"):
        value = getattr(provider, attr, None)
        if isinstance(value, str) and value:
            return value
    return type(provider).__name__


def native_async(model: BaseChatModel) -> bool:
    """Whether the model implements async calls itself; else LangChain's async path would run
    its sync call on the event loop's default executor."""
    return type(model)._agenerate is not BaseChatModel._agenerate


async def ainvoke_chat(
    model: BaseChatModel, runnable: Runnable[Any, Any], value: Any, *, timeout_s: float
) -> Any:
    """``runnable`` (``model``, or a runnable built on it) on ``value``: awaited and cancelled
    at the deadline when the model implements async itself, else its sync path on the model's
    bulkhead. Every chat call of a turn goes through here, never the loop's default executor,
    so a model that hangs holds only its own bulkhead's threads."""
    if native_async(model):
        return await within(runnable.ainvoke(value), timeout_s)
    pool = bulkhead_for(model, "chat-model")
    return await pool.call(runnable.invoke, value, timeout_s=timeout_s)
