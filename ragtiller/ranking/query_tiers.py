"""The policy's query-time tier options applied to a tier list: exact or approximate dense
search, and the parent-child window.

Called once when a graph is built, so a policy can switch these on for any index without
re-ingesting: the HNSW graph is saved at ingest (and built on first use, once per index
object, for an index saved without one).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ragtiller.core.tiers import Tier
from ragtiller.errors import ConfigurationError
from ragtiller.index.dense_tier import DenseTier
from ragtiller.index.parent_child import ParentChildTier
from ragtiller.policies.schema import RetrievalPolicy


def apply_query_options(
    policy: RetrievalPolicy, tiers: Sequence[Tier], index: Any | None
) -> list[Tier]:
    """``tiers`` with the dense search (``dense_backend.search``) and the parent-child window
    (``budgets.window_words``) the policy asks for."""
    out = _with_search(policy.dense_backend.search, tiers, index)
    return [
        t.with_window(policy.budgets.window_words) if isinstance(t, ParentChildTier) else t
        for t in out
    ]


def _with_search(search: str, tiers: Sequence[Tier], index: Any | None) -> list[Tier]:
    """The embedded vector tiers searching every vector or the store's HNSW graph.

    ``auto`` takes the graph where the store has one (ingest saves one with indexes of
    :data:`~ragtiller.index.ann.ANN_MIN_ROWS` chunks and more), ``approximate`` builds one on
    first use where the index has none.

    Raises:
        ConfigurationError: ``approximate`` for vector tiers whose store has no graph and no
            index to build one from.
    """
    out: list[Tier] = []
    for tier in tiers:
        if not isinstance(tier, DenseTier | ParentChildTier):
            out.append(tier)
            continue
        store = tier.store
        if search == "approximate" and store.ann is None:
            if getattr(index, "store", None) is not store or not hasattr(index, "ann"):
                raise ConfigurationError(
                    f"dense_backend.search is approximate but the {tier.name} tier's store has "
                    "no HNSW graph: attach one (NumpyVectorStore.attach_ann), or pass index=..."
                )
            index.ann()  # type: ignore[union-attr]  # checked: hasattr(index, "ann")
        out.append(tier.with_search(store.ann is not None and search != "exact"))
    return out
