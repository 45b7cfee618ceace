"""The local embedding models: a hashing embedder for tests and demos, MiniLM through
sentence-transformers or ONNX Runtime (exported once, cached), and batched embedding with retry;
and the driver of a remote embedding service (batched, concurrent, rate-limited, retried)."""

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
