"""ragtiller: a quota-aware, policy-driven retrieval graph for LangChain and LangGraph.

Names are imported on first use, so ``import ragtiller.stores`` (or a worker process) does not
pay for importing LangGraph.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ragtiller.core.run_manifest import RunManifest, StageSummary
    from ragtiller.core.tiers import Candidate, Hit, StageRecord, Tier
    from ragtiller.errors import (
        ConfigurationError,
        EmbeddingError,
        IndexStoreError,
        IngestError,
        InputError,
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
    from ragtiller.integrations.langchain import as_retriever, as_tool
    from ragtiller.policies import RetrievalPolicy, load_policy
    from ragtiller.policies.run_context import RunContext
    from ragtiller.rerankers.base import Reranker, RerankResult

__version__ = "0.2.0"

_EXPORTS = {
    "ragtiller.errors": "ConfigurationError EmbeddingError IndexStoreError IngestError InputError "
    "PolicyError RagtillerError StoreUnavailableError TierUnavailable",
    "ragtiller.graph": "EVENT_TYPE InputState OutputState RetrievalGraph RetrievalState build_graph",
    "ragtiller.integrations.langchain": "as_retriever as_tool",
    "ragtiller.core.run_manifest": "RunManifest StageSummary",
    "ragtiller.policies": "RetrievalPolicy load_policy",
    "ragtiller.policies.run_context": "RunContext",
    "ragtiller.rerankers.base": "Reranker RerankResult",
    "ragtiller.core.tiers": "Candidate Hit StageRecord Tier",
}
_WHERE = {name: module for module, names in _EXPORTS.items() for name in names.split()}
__all__ = (
    "EVENT_TYPE",
    "Candidate",
    "ConfigurationError",
    "EmbeddingError",
    "Hit",
    "IndexStoreError",
    "IngestError",
    "InputError",
    "InputState",
    "OutputState",
    "PolicyError",
    "RagtillerError",
    "RerankResult",
    "Reranker",
    "RetrievalGraph",
    "RetrievalPolicy",
    "RetrievalState",
    "RunContext",
    "RunManifest",
    "StageRecord",
    "StageSummary",
    "StoreUnavailableError",
    "Tier",
    "TierUnavailable",
    "__version__",
    "as_retriever",
    "as_tool",
    "build_graph",
    "load_policy",
)


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'ragtiller' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
