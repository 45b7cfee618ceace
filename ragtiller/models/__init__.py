"""The local embedding models: a hashing embedder for tests and demos, MiniLM through
sentence-transformers or ONNX Runtime (exported once, cached), and batched embedding with retry."""

from ragtiller.models.batch_embedding import EmbeddingStats, embed_texts
from ragtiller.models.embedders import (
    HashingEmbedder,
    MiniLMEmbedder,
    embedder_identity,
    embedder_variant,
    local_embedder,
)
from ragtiller.models.onnx_embedder import OnnxMiniLMEmbedder
from ragtiller.models.onnx_model import prepare_model

__all__ = (
    "EmbeddingStats",
    "HashingEmbedder",
    "MiniLMEmbedder",
    "OnnxMiniLMEmbedder",
    "embed_texts",
    "embedder_identity",
    "embedder_variant",
    "local_embedder",
    "prepare_model",
)
