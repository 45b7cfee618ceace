"""Rerank providers: free floors (z-score, identity), local and paid models, and cost control.
See ``docs/rerank.md`` for the scale of ``final_score`` under each method."""

from ragtiller.rerankers.base import (
    BaseReranker,
    IdentityReranker,
    Reranker,
    RerankResult,
    ZScoreReranker,
)
from ragtiller.rerankers.ceiling import CeilingReranker, LatencyWindow, reranker_from_policy
from ragtiller.rerankers.cohere_rerank import CohereReranker, MissingCredentialsError
from ragtiller.rerankers.cross_encoder import CANDIDATE_ID_KEY, CrossEncoderReranker, PairScorer

__all__ = (
    "CANDIDATE_ID_KEY",
    "BaseReranker",
    "CeilingReranker",
    "CohereReranker",
    "CrossEncoderReranker",
    "IdentityReranker",
    "LatencyWindow",
    "MissingCredentialsError",
    "PairScorer",
    "RerankResult",
    "Reranker",
    "ZScoreReranker",
    "reranker_from_policy",
)
