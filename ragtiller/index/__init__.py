"""The embedded, offline, persistent index behind the dense, parent-child and lexical tiers."""

from ragtiller.index.corpus_map import build_corpus_map
from ragtiller.index.dense import NumpyVectorStore
from ragtiller.index.dense_tier import DenseTier
from ragtiller.index.embedded import EmbeddedIndex, embedder_for, open_index
from ragtiller.index.lexical import LexicalConfig, LexicalTier, analyze, lexical_text
from ragtiller.index.manifest import EmbedderInfo, IndexCounts, IndexManifest
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
