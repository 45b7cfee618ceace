"""Pinecone as the dense and lexical tiers: everything the Pinecone backend offers, in one place.

Each concept has its own module: the dense tier (``pinecone_dense``), the lexical tier over
BM25 sparse vectors (``pinecone_lexical``), calls and errors (``pinecone_calls``), the env
factories (``pinecone_env``), the upsert pipeline (``pinecone_upsert``) and the BM25
statistics kept in the index (``pinecone_stats``). See ``docs/pinecone.md``.
"""

from ragtiller.index.combinators import FallbackTier, UnavailableTier
from ragtiller.index.pinecone_calls import PineconeTierError, PineconeTimeoutError
from ragtiller.index.pinecone_dense import PineconeTier
from ragtiller.index.pinecone_env import (
    PineconeIndexSettings,
    pinecone_lexical_tier_from_env,
    pinecone_tier_from_env,
)
from ragtiller.index.pinecone_lexical import PineconeLexicalTier
from ragtiller.index.pinecone_upsert import upsert_chunks, upsert_lexical

__all__ = (
    "FallbackTier",
    "PineconeIndexSettings",
    "PineconeLexicalTier",
    "PineconeTier",
    "PineconeTierError",
    "PineconeTimeoutError",
    "UnavailableTier",
    "pinecone_lexical_tier_from_env",
    "pinecone_tier_from_env",
    "upsert_chunks",
    "upsert_lexical",
)
