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
"""A node: an ``async def`` taking the state (or a Send payload), returning a partial update."""
Overview = Callable[[Sequence[str], Mapping[str, Any] | None], str | None]
"""The corpus outline of one turn's scope: its namespaces and its tenant filter. None: no
outline can be given for that scope (it is left out, with a label)."""


def fixed_overview(text: str, namespaces: Sequence[str] | None = None) -> Overview:
    """An outline given as one text: it cannot be cut to a turn's scope, so it is shown only
    on turns that may search all of what it may describe (default deny): no tenant or filter,
    and, when the graph's ``namespaces`` are known, every one of them."""
    whole = frozenset(namespaces or ())

    def outline(asked: Sequence[str], filter: Mapping[str, Any] | None) -> str | None:
        return None if filter or not whole <= set(asked) else text

    return outline


@dataclass(frozen=True)
class Fallback:
    """What answers for a tier that cannot: the tier-search node searches ``tier`` when the
    tier raised one of ``on``, and labels the stage with what served and why.

    Attributes:
        tier: The tier that answers instead (the embedded tier behind a Pinecone one).
        on: The errors that send the search to ``tier``; by default only a known absence
            (:class:`~ragtiller.errors.TierUnavailable`, e.g. ``no-credentials``).
        primary: The stage detail's ``served_by`` when the tier itself answered.
        label: The ``served_by`` when ``tier`` answered.
    """

    tier: Tier
    on: tuple[type[Exception], ...] = (TierUnavailable,)
    primary: str = "primary"
    label: str = "fallback"


@dataclass(frozen=True)
class Components:
    """Everything the nodes use. Built by :func:`ragtiller.build_graph`; immutable per graph.

    The nodes layer owns this type: the graph layer builds it and wires the nodes around it.

    Attributes:
        policy: The retrieval policy that drives the edges.
        embedder: Embeds ``embed_query``; None when no tier needs vectors.
        tiers: Retrieval tiers by name (``dense``, ``parent_child``, ``lexical``, ...).
        quota: The daily LLM budget.
        cache: Step-back (and reranker) cache.
        chat_model: Step-back model; None skips step-back with reason ``no-llm``.
        reranker: The rerank provider (the z-score floor by default).
        overview: The corpus outline of a turn's scope, injected for broad turns without
            step-back.
        llm_router: Optional router strategy; see :mod:`ragtiller.routing.llm`.
        variant: The tiers and reranker for another policy's fusion, feedback and
            parent-child window (a run context's policy); None: they cannot be rebuilt, and
            stay these.
        require_tenant: Refuse a turn that names no tenant (an index of several tenants).
        fallbacks: By tier name, what answers when that tier cannot (:class:`Fallback`).
        pin: Run-context fields fixed for every run (``RetrievalGraph.with_config``): a run
            that sets one differently is refused (:func:`~ragtiller.policies.run_context.pinned`).
    """

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
        """Whether the reranker has an enabled paid ceiling (its edge then reads the quota)."""
        return isinstance(self.reranker, CeilingReranker) and self.reranker.enabled

    @property
    def roles(self) -> dict[str, TierRole]:
        """Each tier's role by tier name, in tier order."""
        return {name: tier_role(tier) for name, tier in self.tiers.items()}

    @property
    def tier_weights(self) -> dict[str, float]:
        """``fusion.tier_weights`` resolved for these tiers (a tier's name, else its role):
        the weights the fuse node fuses with and the embed node mutes tiers by."""
        return weights_by_name(self.policy.fusion.tier_weights, self.roles)

    @property
    def vector_tiers(self) -> Sequence[str]:
        """Names of tiers that need the query vector."""
        return [name for name, tier in self.tiers.items() if tier.needs_vector]
