"""The ingest door and the embedded, offline, persistent index behind the dense, parent-child and lexical tiers."""

from ragtiller._retry import RetryPolicy
from ragtiller.index._embedding import EmbeddingStats, embed_texts
from ragtiller.index.backends import tiers_for_policy
from ragtiller.index.chunking import Chunk, ChunkingConfig, Section, chunk_documents
from ragtiller.index.combinators import FallbackTier, UnavailableTier
from ragtiller.index.corpus_map import build_corpus_map
from ragtiller.index.dense import DenseTier, NumpyVectorStore
from ragtiller.index.embedded import EmbeddedIndex, ingest
from ragtiller.index.embedders import (
    HashingEmbedder,
    MiniLMEmbedder,
    embedder_identity,
    embedder_variant,
    local_embedder,
)
from ragtiller.index.lexical import LexicalConfig, LexicalTier, analyze, lexical_text
from ragtiller.index.manifest import EmbedderInfo, IndexCounts, IndexManifest
from ragtiller.index.onnx_embedder import OnnxMiniLMEmbedder
from ragtiller.index.onnx_model import prepare_model
from ragtiller.index.opening import embedder_for, open_index
from ragtiller.index.parent_child import ParentChildTier
from ragtiller.index.pinecone_calls import PineconeTierError, PineconeTimeoutError
from ragtiller.index.pinecone_dense import PineconeTier
from ragtiller.index.pinecone_env import (
    PineconeIndexSettings,
    pinecone_lexical_tier_from_env,
    pinecone_tier_from_env,
)
from ragtiller.index.pinecone_lexical import PineconeLexicalTier
from ragtiller.index.pinecone_upsert import upsert_chunks, upsert_lexical
from ragtiller.index.sources import SkippedSource, SourceDocument, load_sources
from ragtiller.index.sparse_bm25 import BM25SparseEncoder, BM25Stats
from ragtiller.index.stdlib_corpus import stdlib_documents

__all__ = (
    "BM25SparseEncoder",
    "BM25Stats",
    "Chunk",
    "ChunkingConfig",
    "DenseTier",
    "EmbeddedIndex",
    "EmbedderInfo",
    "EmbeddingStats",
    "FallbackTier",
    "HashingEmbedder",
    "IndexCounts",
    "IndexManifest",
    "LexicalConfig",
    "LexicalTier",
    "MiniLMEmbedder",
    "NumpyVectorStore",
    "OnnxMiniLMEmbedder",
    "ParentChildTier",
    "PineconeIndexSettings",
    "PineconeLexicalTier",
    "PineconeTier",
    "PineconeTierError",
    "PineconeTimeoutError",
    "RetryPolicy",
    "Section",
    "SkippedSource",
    "SourceDocument",
    "UnavailableTier",
    "analyze",
    "build_corpus_map",
    "chunk_documents",
    "embed_texts",
    "embedder_for",
    "embedder_identity",
    "embedder_variant",
    "ingest",
    "lexical_text",
    "load_sources",
    "local_embedder",
    "open_index",
    "pinecone_lexical_tier_from_env",
    "pinecone_tier_from_env",
    "prepare_model",
    "stdlib_documents",
    "tiers_for_policy",
    "upsert_chunks",
    "upsert_lexical",
)
