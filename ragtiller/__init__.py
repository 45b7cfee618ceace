"""ragtiller: a quota-aware, policy-driven retrieval graph for LangChain and LangGraph. Names are
imported on first use, so ``import ragtiller.stores`` does not pay for importing LangGraph."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the names __getattr__ imports, for type checkers
    from ragtiller.core.run_manifest import RunManifest as RunManifest
    from ragtiller.core.run_manifest import StageSummary as StageSummary
    from ragtiller.core.tiers import Candidate as Candidate
    from ragtiller.core.tiers import Hit as Hit
    from ragtiller.core.tiers import StageRecord as StageRecord
    from ragtiller.core.tiers import Tier as Tier
    from ragtiller.errors import ConfigurationError as ConfigurationError
    from ragtiller.errors import EmbeddingError as EmbeddingError
    from ragtiller.errors import IndexStoreError as IndexStoreError
    from ragtiller.errors import IngestError as IngestError
    from ragtiller.errors import InputError as InputError
    from ragtiller.errors import PolicyError as PolicyError
    from ragtiller.errors import RagtillerError as RagtillerError
    from ragtiller.errors import StoreUnavailableError as StoreUnavailableError
    from ragtiller.errors import TierUnavailable as TierUnavailable
    from ragtiller.graph import EVENT_TYPE as EVENT_TYPE
    from ragtiller.graph import InputState as InputState
    from ragtiller.graph import OutputState as OutputState
    from ragtiller.graph import RetrievalGraph as RetrievalGraph
    from ragtiller.graph import RetrievalState as RetrievalState
    from ragtiller.graph import build_graph as build_graph
    from ragtiller.integrations.langchain import as_retriever as as_retriever
    from ragtiller.integrations.langchain import as_tool as as_tool
    from ragtiller.policies import RetrievalPolicy as RetrievalPolicy
    from ragtiller.policies import load_policy as load_policy
    from ragtiller.policies.run_context import RunContext as RunContext
    from ragtiller.rerankers.base import Reranker as Reranker
    from ragtiller.rerankers.base import RerankResult as RerankResult

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
__all__ = ("__version__", *_WHERE)


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'ragtiller' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
