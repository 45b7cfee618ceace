"""The ingest door and the embedded, offline, persistent index behind the dense, parent-child and lexical tiers."""

from ragtiller._retry import RetryPolicy
from ragtiller.index._embedding import EmbeddingStats, embed_texts
from ragtiller.index.backends import tiers_for_policy
from ragtiller.index.chunking import Chunk, ChunkingConfig, Section, chunk_documents
from ragtiller.index.corpus_map import build_corpus_map
from ragtiller.index.dense import DenseTier, NumpyVectorStore
from ragtiller.index.embedded import EmbeddedIndex
from ragtiller.index.embedders import (
    HashingEmbedder,
    MiniLMEmbedder,
    embedder_identity,
    local_embedder,
)
from ragtiller.index.ingesting import ingest
from ragtiller.index.lexical import LexicalConfig, LexicalTier
from ragtiller.index.manifest import EmbedderInfo, IndexCounts, IndexManifest
from ragtiller.index.opening import embedder_for, open_index
from ragtiller.index.parent_child import ParentChildTier
from ragtiller.index.progress import IngestProgress
from ragtiller.index.record_manager import SQLiteRecordManager
from ragtiller.index.report import IngestReport
from ragtiller.index.sources import SkippedSource, SourceDocument, load_sources
from ragtiller.index.stdlib_corpus import stdlib_documents
from ragtiller.index.sync import ChangeCounts, Cleanup, SyncResult, sync_vector_store

__all__ = (
    "ChangeCounts",
    "Chunk",
    "ChunkingConfig",
    "Cleanup",
    "DenseTier",
    "EmbeddedIndex",
    "EmbedderInfo",
    "EmbeddingStats",
    "HashingEmbedder",
    "IndexCounts",
    "IndexManifest",
    "IngestProgress",
    "IngestReport",
    "LexicalConfig",
    "LexicalTier",
    "MiniLMEmbedder",
    "NumpyVectorStore",
    "ParentChildTier",
    "RetryPolicy",
    "SQLiteRecordManager",
    "Section",
    "SkippedSource",
    "SourceDocument",
    "SyncResult",
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
    "sync_vector_store",
    "tiers_for_policy",
)
