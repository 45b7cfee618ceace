"""Whether an index built by another variant of the same embedder can keep its vectors.

The ONNX int8 and torch paths of MiniLM share a name and dimension, so either loads the other's
index. That is only sound while their vectors agree: this re-embeds a sample of the chunks and
compares; below :data:`MIN_AGREEMENT` mean cosine, the index has to be rebuilt.
"""

from __future__ import annotations

import numpy as np
from langchain_core.embeddings import Embeddings

from ragtiller.index.embedded import EmbeddedIndex
from ragtiller.index.lexical import lexical_text
from ragtiller.models.batch_embedding import embed_texts
from ragtiller.models.embedders import embedder_variant

MIN_AGREEMENT = 0.99


def vector_agreement(index: EmbeddedIndex, embedder: Embeddings, *, sample: int = 64) -> float:
    """Mean cosine between stored vectors and ``embedder``'s for up to ``sample`` chunks spread
    evenly over the index, each embedded as ingest does (title, a space, the chunk)."""
    store = index.store
    if len(store) == 0:
        return 1.0
    rows = np.unique(np.linspace(0, len(store) - 1, num=min(sample, len(store)), dtype=np.int64))
    records = store.records
    texts = [lexical_text(records.texts[r], records.metadatas[r].get("title")) for r in rows]
    fresh = embed_texts(embedder, texts, progress=False)
    return float((fresh * store.vectors[rows]).sum(axis=1).mean())


def variant_rebuild_reason(index: EmbeddedIndex, embedder: Embeddings) -> str | None:
    """Why ``index`` must be rebuilt for ``embedder``'s variant, or None when it can stay.

    Nothing is re-embedded when the variants are equal or ``embedder`` names none; an index
    whose embedder named none counts as another variant.
    """
    built, now = index.manifest.embedder_variant, embedder_variant(embedder)
    if now is None or built == now:
        return None
    agreement = vector_agreement(index, embedder)
    if agreement >= MIN_AGREEMENT:
        return None
    return (
        f"embedder variant changed from {built or 'unrecorded'} to {now} and the vectors agree to a mean "
        f"cosine of {agreement:.3f} (< {MIN_AGREEMENT})"
    )
