"""The embedded, offline, persistent index behind the dense, parent-child and lexical tiers.

It stores what :mod:`ragtiller.ingest` builds and never imports it. Names that lived here in
0.1 and moved (the embedders, ingest, Pinecone) still resolve, with a ``DeprecationWarning``.
"""

from ragtiller import _moved
from ragtiller.index.corpus_map import build_corpus_map
from ragtiller.index.dense import DenseTier, NumpyVectorStore
from ragtiller.index.embedded import EmbeddedIndex
from ragtiller.index.lexical import LexicalConfig, LexicalTier, analyze, lexical_text
from ragtiller.index.manifest import EmbedderInfo, IndexCounts, IndexManifest
from ragtiller.index.opening import embedder_for, open_index
from ragtiller.index.parent_child import ParentChildTier
from ragtiller.index.units import ChunkingConfig, Section, SourceDocument

__all__ = (
    "ChunkingConfig",
    "DenseTier",
    "EmbeddedIndex",
    "EmbedderInfo",
    "IndexCounts",
    "IndexManifest",
    "LexicalConfig",
    "LexicalTier",
    "NumpyVectorStore",
    "ParentChildTier",
    "Section",
    "SourceDocument",
    "analyze",
    "build_corpus_map",
    "embedder_for",
    "lexical_text",
    "open_index",
)

_MODELS = "ragtiller.models"
_INGEST = "ragtiller.ingest"
_PINECONE = "ragtiller.pinecone"
__getattr__ = _moved.moved_names(
    "ragtiller.index",
    {
        "RetryPolicy": "ragtiller.core",
        "tiers_for_policy": "ragtiller.graph",
        **dict.fromkeys(
            [
                "EmbeddingStats",
                "HashingEmbedder",
                "MiniLMEmbedder",
                "OnnxMiniLMEmbedder",
                "embed_texts",
                "embedder_identity",
                "embedder_variant",
                "local_embedder",
                "prepare_model",
            ],
            _MODELS,
        ),
        **dict.fromkeys(
            [
                "ChangeCounts",
                "Chunk",
                "Cleanup",
                "IngestProgress",
                "IngestReport",
                "SQLiteRecordManager",
                "SkippedSource",
                "SyncResult",
                "chunk_documents",
                "chunk_sources",
                "ingest",
                "ingest_to_store",
                "load_sources",
                "stdlib_documents",
                "sync_vector_store",
            ],
            _INGEST,
        ),
        **dict.fromkeys(
            [
                "BM25SparseEncoder",
                "BM25Stats",
                "PineconeIndexSettings",
                "PineconeLexicalTier",
                "PineconeTier",
                "PineconeTierError",
                "PineconeTimeoutError",
                "pinecone_lexical_tier_from_env",
                "pinecone_tier_from_env",
                "upsert_chunks",
                "upsert_lexical",
            ],
            _PINECONE,
        ),
    },
)
