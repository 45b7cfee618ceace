"""Batched document embedding with retry, call counting and a progress bar."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from langchain_core.embeddings import Embeddings
from tqdm import tqdm

from ragtiller.core.providers import model_label
from ragtiller.core.retry import RetryPolicy, retry_call
from ragtiller.errors import EmbeddingError

logger = logging.getLogger("ragtiller.index")

Matrix = npt.NDArray[np.float32]
DEFAULT_RETRY = RetryPolicy()


@dataclass
class EmbeddingStats:
    """What building an index cost in embedder calls (failed attempts included)."""

    calls: int = 0
    retries: int = 0
    chunks_embedded: int = 0


def embed_texts(
    embedder: Embeddings,
    texts: Sequence[str],
    *,
    batch_size: int = 64,
    retry: RetryPolicy = DEFAULT_RETRY,
    stats: EmbeddingStats | None = None,
    progress: bool = True,
    sleep: Callable[[float], None] = time.sleep,
    on_batch: Callable[[int], None] | None = None,
) -> Matrix:
    """One L2-normalised float32 row per text, in order, embedded in batches (shortest texts
    first, so a batch pads to similar lengths), a failed batch retried with backoff."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be > 0, but got {batch_size}")
    stats = stats if stats is not None else EmbeddingStats()
    name = model_label(embedder)
    out: Matrix | None = None
    with tqdm(
        total=len(texts),
        desc="embedding",
        unit="chunk",
        disable=not progress or len(texts) <= batch_size,
        leave=False,
    ) as bar:
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for first in range(0, len(texts), batch_size):
            rows = order[first : first + batch_size]
            batch = [texts[i] for i in rows]
            block = _embed_batch(embedder, name, batch, first, retry, stats, sleep)
            if out is None:
                out = np.empty((len(texts), block.shape[1]), dtype=np.float32)
            elif block.shape[1] != out.shape[1]:
                raise EmbeddingError(
                    f"embedder {name!r} changed dimension from {out.shape[1]} to "
                    f"{block.shape[1]} at text {first}"
                )
            out[rows] = block
            stats.chunks_embedded += len(batch)
            bar.update(len(batch))
            if on_batch is not None:
                on_batch(len(batch))
    if out is None:
        raise ValueError("texts must not be empty")
    return out


def normalize_rows(matrix: npt.ArrayLike) -> Matrix:
    """``matrix`` as float32, each row of unit length (zero rows stay zero)."""
    array = np.array(matrix, dtype=np.float32, ndmin=2)
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    array /= norms
    return array


def _embed_batch(
    embedder: Embeddings,
    name: str,
    batch: list[str],
    first: int,
    retry: RetryPolicy,
    stats: EmbeddingStats,
    sleep: Callable[[float], None],
) -> Matrix:
    span = f"{first}-{first + len(batch) - 1}"

    def call() -> list[list[float]]:
        stats.calls += 1
        try:
            return embedder.embed_documents(batch)
        except Exception as e:
            logger.warning(
                "embedder %r failed on texts %s (call %d): %s", name, span, stats.calls, e
            )
            raise

    try:
        rows, attempts = retry_call(call, retry, sleep=sleep)
    except Exception as e:
        raise EmbeddingError(
            f"embedder {name!r} failed on texts {span} after {retry.attempts} attempts: {e}"
        ) from e
    stats.retries += attempts - 1
    expected = len(batch)
    try:
        block = np.asarray(rows, dtype=np.float32)
    except (TypeError, ValueError) as e:
        raise EmbeddingError(f"embedder {name!r} returned non-numeric vectors: {e}") from e
    if block.ndim != 2 or block.shape[0] != expected or block.shape[1] == 0:
        raise EmbeddingError(
            f"embedder {name!r} returned vectors of shape {block.shape} for {expected} texts "
            f"starting at text {first}; expected ({expected}, dimension)"
        )
    if not np.isfinite(block).all():
        raise EmbeddingError(f"embedder {name!r} returned NaN or infinite values at text {first}")
    return normalize_rows(block)
