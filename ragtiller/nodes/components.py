"""The parts a graph is built from, bundled so nodes receive one object."""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel

from ragtiller.core.tiers import Tier, TierRole, tier_role
from ragtiller.errors import TierUnavailable
from ragtiller.policies.run_context import RunContext
from ragtiller.policies.schema import RetrievalPolicy
from ragtiller.ranking.fusion import weights_by_name
from ragtiller.rerankers.base import Reranker
from ragtiller.rerankers.ceiling import CeilingReranker

if TYPE_CHECKING:
    from ragtiller.stores import Cache, QuotaLedger

NodeFn = Callable[[Any], Coroutine[Any, Any, dict[str, Any]]]
Overview = Callable[[Sequence[str], Mapping[str, Any] | None], str | None]
"""The corpus outline of a turn's namespaces and tenant filter; None: none for that scope."""


def fixed_overview(text: str, namespaces: Sequence[str] | None = None) -> Overview:
    """An outline given as one text cannot be cut to a turn's scope: it is shown only on turns
    that may search all it may describe (no tenant or filter, every known namespace)."""
    whole = frozenset(namespaces or ())

    def outline(asked: Sequence[str], filter: Mapping[str, Any] | None) -> str | None:
        return None if filter or not whole <= set(asked) else text

    return outline


@dataclass(frozen=True)
class Fallback:
    """What answers for a tier that raised one of ``on`` (the embedded tier behind a Pinecone
    one); ``primary`` and ``label`` are the stage's ``served_by`` for the tier and for this."""

    tier: Tier
    on: tuple[type[Exception], ...] = (TierUnavailable,)
    primary: str = "primary"
    label: str = "fallback"


@dataclass(frozen=True)
class Components:
    """Everything the nodes use, built by :func:`ragtiller.build_graph`; immutable per graph.
    ``variant`` rebuilds the tiers and reranker for a run policy; ``pin`` holds the run-context
    fields fixed for every run (``RetrievalGraph.with_config``)."""

    policy: RetrievalPolicy
    embedder: Embeddings | None
    tiers: dict[str, Tier]
    quota: QuotaLedger
    cache: Cache
    chat_model: BaseChatModel | None
    reranker: Reranker
    overview: Overview | None = None
    llm_router: Callable[..., Any] | None = None
    variant: Callable[[RetrievalPolicy], tuple[dict[str, Tier], Reranker]] | None = None
    require_tenant: bool = False
    fallbacks: Mapping[str, Fallback] = field(default_factory=dict)
    pin: RunContext | None = None

    @property
    def has_ceiling(self) -> bool:
        return isinstance(self.reranker, CeilingReranker) and self.reranker.enabled

    @property
    def roles(self) -> dict[str, TierRole]:
        return {name: tier_role(tier) for name, tier in self.tiers.items()}

    @property
    def tier_weights(self) -> dict[str, float]:
        return weights_by_name(self.policy.fusion.tier_weights, self.roles)

    @property
    def vector_tiers(self) -> Sequence[str]:
        return [name for name, tier in self.tiers.items() if tier.needs_vector]
