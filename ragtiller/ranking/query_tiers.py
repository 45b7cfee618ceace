"""The policy's query-time tier options, applied once when a graph is built (no re-ingest):
exact or approximate dense search, and the parent-child window."""

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
    """``tiers`` with ``dense_backend.search`` and ``budgets.window_words`` applied. ``auto``
    takes the store's HNSW graph where it has one; ``approximate`` builds one on first use."""
    search = policy.dense_backend.search
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
    return [
        t.with_window(policy.budgets.window_words) if isinstance(t, ParentChildTier) else t
        for t in out
    ]
