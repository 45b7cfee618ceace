"""Pinecone as the dense and lexical tiers: everything the Pinecone backend offers, in one place.

Each concept has its own module: the dense tier (``dense``), the lexical tier over BM25 sparse
vectors (``lexical``, ``sparse_bm25``), calls and errors (``calls``), the env factories
(``env``), the upsert pipeline (``upsert``), the BM25 statistics kept in the index (``stats``)
and keeping Pinecone in step with an embedded index (``index_sync``). See ``docs/pinecone.md``.
"""

from ragtiller.pinecone.calls import PineconeTierError, PineconeTimeoutError
from ragtiller.pinecone.dense import PineconeTier
from ragtiller.pinecone.env import (
    PineconeIndexSettings,
    pinecone_lexical_tier_from_env,
    pinecone_tier_from_env,
)
from ragtiller.pinecone.lexical import PineconeLexicalTier
from ragtiller.pinecone.sparse_bm25 import BM25SparseEncoder, BM25Stats
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
