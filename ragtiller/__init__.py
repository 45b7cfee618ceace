"""ragtiller: a quota-aware, policy-driven retrieval graph for LangChain and LangGraph.

Example:
    >>> from ragtiller import build_graph, load_policy
    >>> policy = load_policy()
    >>> policy.policy_id
    'default-retrieval-policy'
"""

from ragtiller.errors import (
    ConfigurationError,
    EmbeddingError,
    IndexStoreError,
    IngestError,
    PolicyError,
    RagtillerError,
    StoreUnavailableError,
    TierUnavailable,
)
from ragtiller.graph import (
    EVENT_TYPE,
    InputState,
    OutputState,
    RetrievalGraph,
    RetrievalState,
    build_graph,
)
from ragtiller.manifest import RunManifest, StageSummary
from ragtiller.policies import RetrievalPolicy, load_policy
from ragtiller.rerankers.base import Reranker, RerankResult
from ragtiller.types import Candidate, Hit, StageRecord, Tier

__version__ = "0.1.0"

__all__ = (
    "EVENT_TYPE",
    "Candidate",
    "ConfigurationError",
    "EmbeddingError",
    "Hit",
    "IndexStoreError",
    "IngestError",
    "InputState",
    "OutputState",
    "PolicyError",
    "RagtillerError",
    "RerankResult",
    "Reranker",
    "RetrievalGraph",
    "RetrievalPolicy",
    "RetrievalState",
    "RunManifest",
    "StageRecord",
    "StageSummary",
    "StoreUnavailableError",
    "Tier",
    "TierUnavailable",
    "__version__",
    "build_graph",
    "load_policy",
)
