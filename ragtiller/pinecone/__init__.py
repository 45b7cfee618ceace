"""Pinecone as the dense and lexical tiers (``tiers``, configured by ``env``), BM25 sparse
vectors and their statistics (``sparse_bm25``), and the ingest doors to it (``upsert``); see
``docs/pinecone.md``."""

from ragtiller.pinecone.env import (
    PineconeIndexSettings,
    pinecone_lexical_tier_from_env,
    pinecone_tier_from_env,
)
from ragtiller.pinecone.sparse_bm25 import BM25SparseEncoder, BM25Stats
from ragtiller.pinecone.tiers import (
    PineconeLexicalTier,
    PineconeTier,
    PineconeTierError,
    PineconeTimeoutError,
)
from ragtiller.pinecone.upsert import upsert_chunks, upsert_lexical

__all__ = (
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
)
