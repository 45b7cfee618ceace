"""Pure fusion maths. A tier whose hits share one score carries no signal (z = 0, a miss -1);
otherwise a miss gets the tier's lowest z. Min-max: a flat tier gives 1, a miss 0."""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from typing import Literal, TypeVar

from ragtiller.core.tiers import Candidate, Hit

FusionMethod = Literal["rrf", "zscore", "minmax"]
K = TypeVar("K", bound=Hashable)  # chunk ids in a turn, document keys in a feedback pass
MISSING_Z_FLAT = -1.0


def zscores(scores: Sequence[float]) -> list[float]:
    """Population z-scores; all zeros when sigma = 0 or there is a single score.

    Example:
        >>> zscores([3.0, 1.0])
        [1.0, -1.0]
    """
    if not scores:
        return []
    n = len(scores)
    mean = math.fsum(scores) / n
    sigma = math.sqrt(math.fsum((s - mean) ** 2 for s in scores) / n)
    if sigma == 0.0 or not math.isfinite(sigma):
        return [0.0] * len(scores)
    return [(s - mean) / sigma for s in scores]


def _missing_z(z_values: Sequence[float]) -> float:
    if not z_values or all(z == 0.0 for z in z_values):
        return MISSING_Z_FLAT
    return min(z_values)


def reciprocal_rank_fusion(
    ranked_lists: Mapping[str, Sequence[K]],
    *,
    k: int = 60,
    weights: Mapping[str, float] | None = None,
) -> dict[K, float]:
    """RRF score per id: the sum over lists of ``weight / (k + rank)``, rank 1-based.

    Example:
        >>> reciprocal_rank_fusion({"a": ["x", "y"], "b": ["y"]}, k=60)["y"]  # 1/62 + 1/61
        0.03252247488101534
    """
    if k <= 0:
        raise ValueError(f"k must be > 0, but got {k}")
    fused: dict[K, float] = {}
    for tier, ids in ranked_lists.items():
        weight = 1.0 if weights is None else weights.get(tier, 1.0)
        for rank, doc_id in enumerate(dict.fromkeys(ids), start=1):
            fused[doc_id] = fused.get(doc_id, 0.0) + weight / (k + rank)
    return fused


def zscore_fusion(
    scored_lists: Mapping[str, Mapping[K, float]], *, weights: Mapping[str, float] | None = None
) -> dict[K, float]:
    """Sum of per-list z-scores; a miss gets that list's lowest z."""
    all_ids = {i for s in scored_lists.values() for i in s}
    fused: dict[K, float] = {}
    for tier, s in scored_lists.items():
        zs = dict(zip(s, zscores(list(s.values())), strict=True))
        weight = 1.0 if weights is None else weights.get(tier, 1.0)
        floor = _missing_z(list(zs.values()))
        for doc_id in all_ids:
            fused[doc_id] = fused.get(doc_id, 0.0) + weight * zs.get(doc_id, floor)
    return fused


def minmax_fusion(
    scored_lists: Mapping[str, Mapping[K, float]], *, weights: Mapping[str, float] | None = None
) -> dict[K, float]:
    """Sum of per-list min-max normalised scores; a miss counts 0, a flat list counts 1."""
    fused: dict[K, float] = {i: 0.0 for s in scored_lists.values() for i in s}
    for tier, scores in scored_lists.items():
        if not scores:
            continue
        weight = 1.0 if weights is None else weights.get(tier, 1.0)
        low, high = min(scores.values()), max(scores.values())
        for doc_id, score in scores.items():
            norm = 1.0 if high == low else (score - low) / (high - low)
            fused[doc_id] += weight * norm
    return fused


def fuse_scores(
    scored_lists: Mapping[str, Mapping[K, float]],
    *,
    method: FusionMethod = "rrf",
    rrf_k: int = 60,
    weights: Mapping[str, float] | None = None,
) -> dict[K, float]:
    """Fused score per key of tier -> (key -> score) lists, each best first.

    Example:
        >>> fuse_scores({"a": {"x": 2.0, "y": 1.0}, "b": {"y": 5.0}}, method="minmax")
        {'x': 1.0, 'y': 1.0}
    """
    if method == "rrf":
        ranked = {tier: list(s) for tier, s in scored_lists.items()}
        return reciprocal_rank_fusion(ranked, k=rrf_k, weights=weights)
    if method == "zscore":
        return zscore_fusion(scored_lists, weights=weights)
    if method == "minmax":
        return minmax_fusion(scored_lists, weights=weights)
    raise ValueError(f"unknown fusion method {method!r}; valid: rrf, zscore, minmax")


def fused_order(
    hits_by_tier: Mapping[str, Sequence[Hit]],
    *,
    method: FusionMethod = "rrf",
    rrf_k: int = 60,
    weights: Mapping[str, float] | None = None,
) -> tuple[list[str], dict[str, float], dict[str, dict[str, float]]]:
    """Every id best first, with its fused score, and each tier's id -> raw score. Equal fused
    scores break by the best rank any tier gave, then tier order, then id: equal scores are
    common under RRF (rank 1 in one tier = rank 1 in another)."""
    scored = {tier: _best_scores(hits) for tier, hits in hits_by_tier.items()}
    fused = fuse_scores(scored, method=method, rrf_k=rrf_k, weights=weights)
    best: dict[str, tuple[int, int]] = {}
    for position, s in enumerate(scored.values()):
        for rank, doc_id in enumerate(s, start=1):
            held = best.get(doc_id)
            if held is None or (rank, position) < held:
                best[doc_id] = (rank, position)
    order = sorted(fused, key=lambda doc_id: (-fused[doc_id], *best[doc_id], doc_id))
    return order, fused, scored


def fuse_hits(
    hits_by_tier: Mapping[str, Sequence[Hit]],
    *,
    method: FusionMethod = "rrf",
    cap: int,
    rrf_k: int = 60,
    weights: Mapping[str, float] | None = None,
) -> list[Candidate]:
    """At most ``cap`` candidates in :func:`fused_order`, each with every tier's raw score,
    1-based rank and z-score."""
    order, fused, scored = fused_order(hits_by_tier, method=method, rrf_k=rrf_k, weights=weights)
    first_hit: dict[str, Hit] = {}
    for hits in hits_by_tier.values():
        for hit in hits:
            first_hit.setdefault(hit["id"], hit)
    seen: dict[str, list[tuple[str, float, int, float]]] = {}
    for tier, s in scored.items():
        for rank, (doc_id, score, z) in enumerate(
            zip(s, s.values(), zscores(list(s.values())), strict=True), start=1
        ):
            seen.setdefault(doc_id, []).append((tier, score, rank, z))
    candidates: list[Candidate] = []
    for doc_id in order[:cap]:
        hit = first_hit[doc_id]
        tiers = seen[doc_id]
        candidates.append(
            Candidate(
                id=doc_id,
                text=hit["text"],
                doc_id=hit["doc_id"],
                parent_id=hit["parent_id"],
                source=hit["source"],
                metadata=dict(hit["metadata"]),
                tier_scores={t: score for t, score, _, _ in tiers},
                tier_ranks={t: rank for t, _, rank, _ in tiers},
                tier_z={t: z for t, _, _, z in tiers},
                fused_score=fused[doc_id],
            )
        )
    return candidates


def _best_scores(hits: Sequence[Hit]) -> dict[str, float]:
    best: dict[str, float] = {}
    for hit in hits:
        score = float(hit["score"])
        if hit["id"] not in best and math.isfinite(score):
            best[hit["id"]] = score
    return best


def weights_by_name(
    weights: Mapping[str, float], roles: Mapping[str, str] | None
) -> dict[str, float]:
    """``fusion.tier_weights`` by tier name: a tier's own name, else its role's, else 1."""
    out = dict(weights)
    for name, role in (roles or {}).items():
        if name not in out and role in weights:
            out[name] = weights[role]
    return out
