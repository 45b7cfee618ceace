"""Rank documents, not chunks: collapse each tier's chunk hits to one hit per document.

A document cut into several chunks otherwise fills several candidate slots and casts several
votes in fusion, while a one-chunk document casts one; the top 100 candidates then hold far
fewer than 100 documents. Collapsing first makes every tier a ranked list of documents (what
the reference baselines fuse), and the fused list holds one representative chunk per document.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from ragtiller.core.tiers import Candidate, Hit
from ragtiller.ranking.fusion import DEFAULT_MARGIN, FusionMethod, fused_order

DocAggregation = Literal["off", "max", "sum"]
"""How one tier's hits of one document combine: ``max`` keeps the best chunk's score, ``sum``
adds the scores of every chunk of the document the tier returned; ``off`` keeps chunk hits."""

DocKey = tuple[str, str]


def doc_key(hit: Hit | Candidate | Mapping[str, Any]) -> DocKey:
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


SECTION_UNIT = "section"
"""``metadata["unit"]`` of a hit that scores a whole section (section-level BM25): it votes for
its document's rank but is never returned, since a section has no bound on its size."""


def is_section_hit(hit: Hit) -> bool:
    """Whether ``hit`` scores a whole section rather than a passage."""
    return hit["metadata"].get("unit") == SECTION_UNIT


def document_order(
    hits_by_tier: Mapping[str, Sequence[Hit]],
    mode: DocAggregation,
    *,
    method: FusionMethod,
    rrf_k: int,
    weights: Mapping[str, float] | None,
    margin: float = DEFAULT_MARGIN,
) -> list[DocKey]:
    """Documents best first: each tier's hits collapsed to documents (``mode``), then fused.

    Section-level hits vote like passages: this is the ranking the document-level evaluation
    sees. ``mode="off"`` has no document ranking and returns an empty list.
    """
    if mode == "off":
        return []
    scored = {
        tier: {doc_key(h): float(h["score"]) for h in hits}
        for tier, hits in collapse_to_documents(hits_by_tier, mode).items()
    }
    return fused_order(scored, method=method, rrf_k=rrf_k, weights=weights, margin=margin)


def interleave(
    passages: Sequence[Candidate],
    documents: Sequence[DocKey],
    within: Callable[[list[Candidate]], list[Candidate]] | None = None,
) -> list[Candidate]:
    """Passages grouped under ranked documents, each document's best passages in its slots.

    ``passages`` is the fused passage order. It decides how many of the leading positions
    each document holds and where (like Elasticsearch field collapsing with ``inner_hits``,
    without forcing a document's passages to sit together). ``documents`` decides which
    document is first, second, ...: the i-th document to appear in ``passages`` hands its
    positions to ``documents[i]`` (documents without passages are skipped). ``within`` orders one
    document's passages (default: fused order). Passages a document has beyond its positions
    follow at the end, in fused order; nothing is dropped or repeated.

    Example:
        >>> def c(i, d):
        ...     return {"id": i, "doc_id": d, "metadata": {}}
        >>> order = interleave([c("a1", "A"), c("b1", "B"), c("a2", "A")], [("", "B"), ("", "A")])
        >>> [p["id"] for p in order]
        ['b1', 'a1', 'a2']
    """
    by_doc: dict[DocKey, list[Candidate]] = {}
    for cand in passages:
        by_doc.setdefault(doc_key(cand), []).append(cand)
    if within is not None:
        by_doc = {key: within(group) for key, group in by_doc.items()}
    ranked = [key for key in dict.fromkeys(documents) if key in by_doc]
    listed = set(ranked)
    ranked += [key for key in by_doc if key not in listed]
    pattern = [doc_key(c) for c in passages]
    rename = dict(zip(dict.fromkeys(pattern), ranked, strict=True))
    taken: dict[DocKey, int] = {}
    out: list[Candidate] = []
    for slot in pattern:
        key = rename[slot]
        n = taken.get(key, 0)
        if n < len(by_doc[key]):
            out.append(by_doc[key][n])
            taken[key] = n + 1
    placed = {id(c) for c in out}
    out.extend(c for key in ranked for c in by_doc[key] if id(c) not in placed)
    return out
