"""The ingest door and the embedded, offline, persistent index behind the dense, parent-child and lexical tiers."""

from ragtiller._retry import RetryPolicy
from ragtiller.index._embedding import EmbeddingStats, embed_texts
from ragtiller.index.backends import tiers_for_policy
from ragtiller.index.chunking import Chunk, ChunkingConfig, Section, chunk_documents
from ragtiller.index.corpus_map import build_corpus_map
from ragtiller.index.dense import DenseTier, NumpyVectorStore
from ragtiller.index.embedded import EmbeddedIndex, ingest
from ragtiller.index.embedders import (
    HashingEmbedder,
    MiniLMEmbedder,
    embedder_identity,
    local_embedder,
)
from ragtiller.index.lexical import LexicalConfig, LexicalTier
from ragtiller.index.manifest import EmbedderInfo, IndexCounts, IndexManifest
from ragtiller.index.opening import embedder_for, open_index
from ragtiller.index.parent_child import ParentChildTier
from ragtiller.index.sources import SkippedSource, SourceDocument, load_sources
from ragtiller.index.stdlib_corpus import stdlib_documents

__all__ = (
    "Chunk",
    "ChunkingConfig",
    "DenseTier",
    "EmbeddedIndex",
    "EmbedderInfo",
    "EmbeddingStats",
    "HashingEmbedder",
    "IndexCounts",
    "IndexManifest",
    "LexicalConfig",
    "LexicalTier",
    "MiniLMEmbedder",
    "NumpyVectorStore",
    "ParentChildTier",
    "RetryPolicy",
    "Section",
    "SkippedSource",
    "SourceDocument",
    "build_corpus_map",
    "chunk_documents",
    "embed_texts",
    "embedder_for",
    "embedder_identity",
    "ingest",
    "load_sources",
    "local_embedder",
    "open_index",
    "stdlib_documents",
    "tiers_for_policy",
)
