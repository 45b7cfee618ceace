"""The policy's query-time tier options applied to a tier list: exact or approximate dense
search, the parent-child window, section-level BM25 and feedback.

Called once when a graph is built, so a policy can switch these on for any index without
re-ingesting: the section-level BM25 index and the HNSW graph are saved at ingest (and built on
first use, once per index object, for an index saved without them), the feedback tiers wrap the
tiers they improve.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

from ragtiller.core.tiers import DENSE, PARENT_CHILD, Tier, tier_role
from ragtiller.errors import ConfigurationError
from ragtiller.index.dense import DenseTier, NumpyVectorStore
from ragtiller.index.lexical import DEFAULT_LEXICAL, LexicalTier
from ragtiller.index.parent_child import ParentChildTier
from ragtiller.index.scans import SharedScans
from ragtiller.policies.schema import RetrievalPolicy
from ragtiller.ranking.documents import SECTION_UNIT
from ragtiller.ranking.feedback import RM3Tier, RocchioTier
from ragtiller.ranking.units import LexicalUnitsTier, Units, index_units, with_units

_SECTION_LEXICAL: weakref.WeakKeyDictionary[Any, LexicalTier] = weakref.WeakKeyDictionary()
VECTOR_ROLES = (DENSE, PARENT_CHILD)
"""Roles of the tiers Rocchio feedback moves (over the embedded store)."""


def section_lexical_tier(index: Any) -> LexicalTier:
    """BM25 over the index's parent sections (title + section text), built once per index.

    Hits are sections (``parent_id`` None, ``metadata["unit"]`` ``section``); BM25 length
    normalisation and document frequencies are then those of whole sections. They vote for
    their document's rank; the passages shown come from the other tiers. An embedded index
    saves it at ingest (``EmbeddedIndex.section_lexical``).
    """
    saved = getattr(index, "section_lexical", None)
    if isinstance(saved, LexicalTier):
        return saved
    tier = _SECTION_LEXICAL.get(index)
    if tier is None:
        parents = index.parents
        texts = [
            f"{md['title']} {text}" if md.get("title") else text
            for text, md in zip(parents.texts, parents.metadatas, strict=True)
        ]
        manifest = getattr(index, "manifest", None)
        config = getattr(manifest, "lexical", None) or DEFAULT_LEXICAL
        tier = LexicalTier.build(parents, texts, config, unit=SECTION_UNIT)
        _SECTION_LEXICAL[index] = tier
    return tier


def apply_query_options(
    policy: RetrievalPolicy, tiers: Sequence[Tier], index: Any | None
) -> list[Tier]:
    """``tiers`` with the parent-child window, lexical unit and feedback the policy asks for.

    Options that need what this tier list lacks (a section table, embedded vectors) leave the
    tier as it is: a Pinecone dense tier is not moved by Rocchio, since its vectors are remote,
    and fused Rocchio feedback reads only an embedded lexical tier (a remote one would be
    called twice per turn), else the vector tier's own first pass.
    """
    out = _with_search(policy.dense_backend.search, tiers, index)
    out = [
        t.with_window(policy.budgets.window_words) if isinstance(t, ParentChildTier) else t
        for t in out
    ]
    if policy.fusion.lexical_unit == "section" and index is not None and hasattr(index, "parents"):
        section = section_lexical_tier(index)
        out = [section if isinstance(t, LexicalTier) else t for t in out]
    feedback = policy.feedback
    if feedback.lexical == "rm3":
        out = [RM3Tier(t, feedback) if isinstance(t, LexicalTier) else t for t in out]
    if policy.fusion.doc_aggregation == "max":  # before Rocchio: the moved query scores units
        out = with_units(out, index, policy.fusion.document_unit)
    if feedback.dense == "rocchio":
        store = _embedded_store(out)
        plain = [_plain(t) for t in out]
        lexical = next((t for t in plain if isinstance(t, LexicalTier | RM3Tier)), None)
        if store is not None:
            shared = SharedScans()  # one fused first pass per turn for both vector tiers
            units = (
                index_units(index, "paragraph")
                if feedback.dense_vectors == "paragraph" and hasattr(index, "parents")
                else None
            )
            out = [_rocchio(t, store, policy, lexical, shared, units) for t in out]
    return out


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


def _rocchio(
    tier: Tier,
    store: NumpyVectorStore,
    policy: RetrievalPolicy,
    lexical: Tier | None,
    shared: SharedScans,
    units: Units | None,
) -> Tier:
    if tier_role(tier) in VECTOR_ROLES and getattr(tier, "store", None) is store:
        return RocchioTier(
            tier,
            store,
            policy.feedback,
            lexical=lexical,
            fusion=policy.fusion,
            first_passes=shared,
            unit_vectors=None if units is None else units.vectors_of_rows,
        )
    return tier


def _embedded_store(tiers: Sequence[Tier]) -> NumpyVectorStore | None:
    dense = next((t for t in tiers if tier_role(t) == DENSE), None)
    store = getattr(dense, "store", None)
    return store if isinstance(store, NumpyVectorStore) else None


def _plain(tier: Tier) -> Tier:
    """The tier a unit-scoring wrapper holds (Rocchio's first pass needs passage scores only)."""
    return tier.inner if isinstance(tier, LexicalUnitsTier) else tier
