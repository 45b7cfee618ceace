"""The ingest door and the embedded, offline, persistent index behind the dense, parent-child and lexical tiers."""

from ragtiller._retry import RetryPolicy
from ragtiller.index._embedding import EmbeddingStats, embed_texts
from ragtiller.index.backends import tiers_for_policy
from ragtiller.index.chunking import Chunk, ChunkingConfig, Section, chunk_documents
from ragtiller.index.combinators import FallbackTier, UnavailableTier
from ragtiller.index.corpus_map import build_corpus_map
from ragtiller.index.dense import DenseTier, NumpyVectorStore
from ragtiller.index.embedded import EmbeddedIndex
from ragtiller.index.embedders import (
    HashingEmbedder,
    MiniLMEmbedder,
    embedder_identity,
    embedder_variant,
    local_embedder,
)
from ragtiller.index.ingesting import ingest
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
from ragtiller.index.progress import IngestProgress
from ragtiller.index.record_manager import SQLiteRecordManager
from ragtiller.index.report import IngestReport
from ragtiller.index.sources import SkippedSource, SourceDocument, load_sources
from ragtiller.index.sparse_bm25 import BM25SparseEncoder, BM25Stats
from ragtiller.index.stdlib_corpus import stdlib_documents
from ragtiller.index.store_ingest import chunk_sources, ingest_to_store
from ragtiller.index.sync import ChangeCounts, Cleanup, SyncResult, sync_vector_store

__all__ = (
    "BM25SparseEncoder",
    "BM25Stats",
    "ChangeCounts",
    "Chunk",
    "ChunkingConfig",
    "Cleanup",
    "DenseTier",
    "EmbeddedIndex",
    "EmbedderInfo",
    "EmbeddingStats",
    "FallbackTier",
    "HashingEmbedder",
    "IndexCounts",
    "IndexManifest",
    "IngestProgress",
    "IngestReport",
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
    "SQLiteRecordManager",
    "Section",
    "SkippedSource",
    "SourceDocument",
    "SyncResult",
    "UnavailableTier",
    "analyze",
    "build_corpus_map",
    "chunk_documents",
    "chunk_sources",
    "embed_texts",
    "embedder_for",
    "embedder_identity",
    "embedder_variant",
    "ingest",
    "ingest_to_store",
    "lexical_text",
    "load_sources",
    "local_embedder",
    "open_index",
    "pinecone_lexical_tier_from_env",
    "pinecone_tier_from_env",
    "prepare_model",
    "stdlib_documents",
    "sync_vector_store",
    "tiers_for_policy",
    "upsert_chunks",
    "upsert_lexical",
)
