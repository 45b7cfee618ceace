"""Rank documents, not chunks: collapse each tier's chunk hits to one hit per document.

A document cut into several chunks otherwise fills several candidate slots and casts several
votes in fusion, while a one-chunk document casts one; the top 100 candidates then hold far
fewer than 100 documents. Collapsing first makes every tier a ranked list of documents (what
the reference baselines fuse), and the fused list holds one representative chunk per document.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

from ragtiller.types import Hit

DocAggregation = Literal["off", "max", "sum"]
"""How one tier's hits of one document combine: ``max`` keeps the best chunk's score, ``sum``
adds the scores of every chunk of the document the tier returned; ``off`` keeps chunk hits."""

DocKey = tuple[str, str]


def doc_key(hit: Hit) -> DocKey:
    """A hit's document: its namespace and ``doc_id`` (ids are unique per namespace)."""
    return (str(hit["metadata"].get("namespace", "")), hit["doc_id"])


def collapse_to_documents(
    hits_by_tier: Mapping[str, Sequence[Hit]], mode: DocAggregation
) -> dict[str, list[Hit]]:
    """One hit per document per tier, re-ranked by the aggregated score.

    Every tier's hit of a document takes the id and text of ONE representative: the hit that
    ranked highest in any tier (ties: the earlier tier), so fusion sees the same candidate id in
    every tier and the context shows that document's best passage. ``mode="off"`` returns the
    hits unchanged.

    Example:
        >>> a = {"id": "c1", "text": "x", "score": 2.0, "doc_id": "d", "parent_id": None,
        ...      "source": "", "metadata": {}}
        >>> b = {**a, "id": "c2", "score": 1.0}
        >>> [(h["id"], h["score"]) for h in collapse_to_documents({"t": [a, b]}, "sum")["t"]]
        [('c1', 3.0)]
    """
    if mode == "off":
        return {tier: list(hits) for tier, hits in hits_by_tier.items()}
    best_rank: dict[DocKey, tuple[int, int, Hit]] = {}
    per_tier: dict[str, dict[DocKey, float]] = {}
    for tier_pos, (tier, hits) in enumerate(hits_by_tier.items()):
        scores: dict[DocKey, float] = {}
        for rank, hit in enumerate(hits):
            key = doc_key(hit)
            score = float(hit["score"])
            if key not in scores:
                scores[key] = score
            elif mode == "sum":
                scores[key] += score
            else:
                scores[key] = max(scores[key], score)
            held = best_rank.get(key)
            if held is None or (rank, tier_pos) < held[:2]:
                best_rank[key] = (rank, tier_pos, hit)
        per_tier[tier] = scores
    collapsed: dict[str, list[Hit]] = {}
    for tier, scores in per_tier.items():
        # stable sort: equal aggregated scores keep the tier's own order
        ordered = sorted(scores.items(), key=lambda item: -item[1])
        collapsed[tier] = [{**best_rank[key][2], "score": score} for key, score in ordered]
    return collapsed
