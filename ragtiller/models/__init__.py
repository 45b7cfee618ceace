"""Embedding: a hashing embedder for tests, MiniLM on ONNX Runtime or torch, batched embedding
with retry, and the driver of a remote embedding service."""

from ragtiller.models.batch_embedding import EmbeddingStats, embed_texts
from ragtiller.models.embedders import (
    HashingEmbedder,
    MiniLMEmbedder,
    embedder_identity,
    embedder_variant,
    local_embedder,
)
from ragtiller.models.onnx_model import OnnxMiniLMEmbedder, prepare_model
from ragtiller.models.service_embedding import (
    OpenAICompatibleEmbeddings,
    ServiceEmbeddings,
    ServiceStats,
)

__all__ = (
    "EmbeddingStats",
    "HashingEmbedder",
    "MiniLMEmbedder",
    "OnnxMiniLMEmbedder",
    "OpenAICompatibleEmbeddings",
    "ServiceEmbeddings",
    "ServiceStats",
    "embed_texts",
    "embedder_identity",
    "embedder_variant",
    "local_embedder",
    "prepare_model",
)
