"""Facts about any provider object (a chat model, an embedder) that ragtiller reports."""

from __future__ import annotations


def model_label(provider: object) -> str:
    """The provider's model name (``model_name`` or ``model``), else its class name.

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
