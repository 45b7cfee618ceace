"""Pure fusion maths: reciprocal rank fusion, z-score and min-max fusion of tier hit lists.

Every function here is deterministic and graph-free, so it is unit-tested against hand-computed
values. Conventions for degenerate input (documented once, used everywhere):

* a tier whose hits all share one score (sigma = 0, including a single hit) carries no ranking
  signal: its hits get z = 0, and a candidate that tier missed gets z = -1;
* otherwise a candidate a tier missed gets that tier's lowest z (it ranked below everything the
  tier returned), never 0 and never NaN;
* min-max maps a tier to [0, 1]; with max == min every hit gets 1, a miss gets 0.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from typing import Literal, TypeVar

from ragtiller.core.tiers import Candidate, Hit

FusionMethod = Literal["rrf", "zscore", "minmax", "margin"]
K = TypeVar("K", bound=Hashable)
"""What is fused: chunk ids in a turn, document keys in a feedback first pass."""
Key = TypeVar("Key", str, tuple[str, str])
"""A key :func:`fused_order` sorts: a chunk or unit id, or a document key."""
MISSING_Z_FLAT = -1.0
"""z given to a miss in a tier whose scores are all equal (no spread to measure against)."""
DEFAULT_MARGIN = 1.0
"""``margin`` fusion's default threshold: a top score one standard deviation above the next."""


def zscores(scores: Sequence[float]) -> list[float]:
    """Population z-scores; all zeros when sigma = 0 or there is a single score.

    Example:
        >>> zscores([3.0, 1.0])
        [1.0, -1.0]
    """
    if not scores:
        return []
    mean, sigma = _spread(scores)
    if sigma == 0.0 or not math.isfinite(sigma):
        return [0.0] * len(scores)
    return [(s - mean) / sigma for s in scores]


def _spread(scores: Sequence[float]) -> tuple[float, float]:
    """Mean and population standard deviation of non-empty ``scores``."""
    n = len(scores)
    mean = math.fsum(scores) / n
    return mean, math.sqrt(math.fsum((s - mean) ** 2 for s in scores) / n)


def scaled_zscores(
    scores: Mapping[K, float], scale: int | None = None, extra: Mapping[K, float] | None = None
) -> tuple[dict[K, float], dict[K, float]]:
    """z of a tier's ``scores`` (best first) and of its ``extra`` scores (keys it did not
    return, scored by the tier on request), both against the mean and spread of its first
    ``scale`` scores (None: all of them). Returns ``(z of scores, z of extra)``.

    With no ``scale`` and no ``extra`` this is :func:`zscores`. A spread of 0 gives every
    score z = 0 and drops ``extra`` (a flat list measures nothing).

    Example:
        >>> scaled_zscores({"a": 3.0, "b": 1.0, "c": -1.0}, scale=2, extra={"d": 0.0})
        ({'a': 1.0, 'b': -1.0, 'c': -3.0}, {'d': -2.0})
    """
    values = list(scores.values())
    head = values if scale is None else values[:scale]
    if not head:
        return {}, {}
    mean, sigma = _spread(head)
    if sigma == 0.0 or not math.isfinite(sigma):
        return dict.fromkeys(scores, 0.0), {}
    z = dict(zip(scores, ((s - mean) / sigma for s in values), strict=True))
    more = {k: (v - mean) / sigma for k, v in (extra or {}).items() if k not in scores}
    return z, more


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
    scored_lists: Mapping[str, Mapping[K, float]],
    *,
    weights: Mapping[str, float] | None = None,
    scale: int | None = None,
    extra: Mapping[str, Mapping[K, float]] | None = None,
) -> dict[K, float]:
    """Sum of per-list z-scores; a miss gets that list's lowest z (see module notes).

    ``scale``: each list's mean and spread come from its first ``scale`` scores (None: all).
    ``extra``: per list, scores of keys it did not return, scored by its tier on request
    (``fusion.misses: exact``); such a key gets its own z instead of the floor, and the floor
    is the lowest z of the list and its extra scores together.
    """
    all_ids = {i for s in scored_lists.values() for i in s}
    fused: dict[K, float] = {}
    for tier, s in scored_lists.items():
        zs, more = scaled_zscores(s, scale, (extra or {}).get(tier))
        zs.update(more)
        weight = 1.0 if weights is None else weights.get(tier, 1.0)
        floor = _missing_z(list(zs.values()))
        for doc_id in all_ids:
            fused[doc_id] = fused.get(doc_id, 0.0) + weight * zs.get(doc_id, floor)
    return fused


def minmax_fusion(
    scored_lists: Mapping[str, Mapping[K, float]],
    *,
    weights: Mapping[str, float] | None = None,
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


def top_margin(scores: Sequence[float]) -> float:
    """How far a list's best score stands above its second, in the list's standard deviations.

    0 when the list has fewer than two scores or no spread. Scores need not be sorted.

    Example:
        >>> top_margin([4.0, 1.0, 1.0, 2.0])  # sigma 1.22..., (4 - 2) / sigma
        1.6329931618554523
    """
    if len(scores) < 2:
        return 0.0
    _, sigma = _spread(scores)
    if sigma == 0.0 or not math.isfinite(sigma):
        return 0.0
    first, second = sorted(scores, reverse=True)[:2]
    return (first - second) / sigma


def margin_method(
    scored_lists: Mapping[str, Mapping[K, float]],
    *,
    margin: float = DEFAULT_MARGIN,
    weights: Mapping[str, float] | None = None,
) -> Literal["rrf", "zscore"]:
    """``margin`` fusion's choice for one query: z-score when some tier is sure, else RRF.

    A tier is sure when its best score stands at least ``margin`` standard deviations above its
    second (:func:`top_margin`): that gap is evidence rank fusion throws away. When no tier's
    top stands out, scores carry little beyond their order, and a single tier's noisy outliers
    would decide a z-score sum, so ranks are fused. Tiers of weight 0 do not vote.
    """
    for tier, scores in scored_lists.items():
        if weights is not None and weights.get(tier, 1.0) == 0.0:
            continue
        if top_margin(list(scores.values())) >= margin:
            return "zscore"
    return "rrf"


def fuse_scores(
    scored_lists: Mapping[str, Mapping[K, float]],
    *,
    method: FusionMethod = "rrf",
    rrf_k: int = 60,
    weights: Mapping[str, float] | None = None,
    margin: float = DEFAULT_MARGIN,
    scale: int | None = None,
    extra: Mapping[str, Mapping[K, float]] | None = None,
) -> dict[K, float]:
    """Fused score per key of tier -> (key -> score) lists, each in its tier's order, best first.

    ``scale`` and ``extra`` are :func:`zscore_fusion`'s; the other methods ignore them.

    Example:
        >>> fuse_scores({"a": {"x": 2.0, "y": 1.0}, "b": {"y": 5.0}}, method="minmax")
        {'x': 1.0, 'y': 1.0}
    """
    if method == "margin":
        method = margin_method(scored_lists, margin=margin, weights=weights)
    if method == "rrf":
        ranked = {tier: list(s) for tier, s in scored_lists.items()}
        return reciprocal_rank_fusion(ranked, k=rrf_k, weights=weights)
    if method == "zscore":
        return zscore_fusion(scored_lists, weights=weights, scale=scale, extra=extra)
    if method == "minmax":
        return minmax_fusion(scored_lists, weights=weights)
    raise ValueError(f"unknown fusion method {method!r}; valid: rrf, zscore, minmax, margin")


def fused_order(
    scored_lists: Mapping[str, Mapping[Key, float]],
    *,
    method: FusionMethod,
    rrf_k: int,
    weights: Mapping[str, float] | None,
    margin: float = DEFAULT_MARGIN,
) -> list[Key]:
    """The keys of :func:`fuse_scores`, best first; ties by the best rank any tier gave the
    key, then the key, so the order never depends on the order the fusion returns them in.

    Example:
        >>> fused_order({"a": {"x": 2.0, "y": 1.0}, "b": {"y": 3.0, "x": 1.0}},
        ...             method="rrf", rrf_k=60, weights=None)
        ['x', 'y']
    """
    fused = fuse_scores(scored_lists, method=method, rrf_k=rrf_k, weights=weights, margin=margin)
    first: dict[Key, int] = {}
    for scored in scored_lists.values():
        for rank, key in enumerate(scored):
            first[key] = min(first.get(key, rank), rank)
    return sorted(fused, key=lambda key: (-fused[key], first[key], key))


def fuse_hits(
    hits_by_tier: Mapping[str, Sequence[Hit]],
    *,
    method: FusionMethod = "rrf",
    cap: int,
    rrf_k: int = 60,
    weights: Mapping[str, float] | None = None,
    margin: float = DEFAULT_MARGIN,
    scale: int | None = None,
    extra: Mapping[str, Mapping[str, float]] | None = None,
) -> list[Candidate]:
    """Merge tier hit lists into at most ``cap`` candidates, best first.

    Each candidate keeps every tier's raw score, 1-based rank and z-score (within that tier's
    whole hit list, or against its first ``scale`` hits). Equal fused scores break by the best
    rank any tier gave the candidate, then by tier order (the order of ``hits_by_tier``), then
    by id, so the order is deterministic. ``scale`` and ``extra``: see :func:`zscore_fusion`.
    """
    scored = {tier: _best_scores(hits) for tier, hits in hits_by_tier.items()}
    fused = fuse_scores(
        scored,
        method=method,
        rrf_k=rrf_k,
        weights=weights,
        margin=margin,
        scale=scale,
        extra=extra,
    )
    first_hit: dict[str, Hit] = {}
    for hits in hits_by_tier.values():
        for hit in hits:
            first_hit.setdefault(hit["id"], hit)
    # each id's score, 1-based rank and z in every tier that has it (in tier order), and the
    # best (rank, tier position) any tier gave it: equal fused scores are common under RRF
    # (rank 1 in one tier = rank 1 in another), so prefer the candidate some tier ranked
    # higher, then the earlier tier, then the id
    seen: dict[str, list[tuple[str, float, int, float]]] = {}
    best: dict[str, tuple[int, int]] = {}
    for position, (tier, s) in enumerate(scored.items()):
        z_of = scaled_zscores(s, scale)[0]
        for rank, (doc_id, score) in enumerate(s.items(), start=1):
            z = z_of[doc_id]
            seen.setdefault(doc_id, []).append((tier, score, rank, z))
            held = best.get(doc_id)
            if held is None or (rank, position) < held:
                best[doc_id] = (rank, position)
    order = sorted(fused, key=lambda doc_id: (-fused[doc_id], *best[doc_id], doc_id))[:cap]
    candidates: list[Candidate] = []
    for doc_id in order:
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


def zscore_combine(
    candidates: Sequence[Candidate],
    *,
    weights: Mapping[str, float] | None = None,
) -> list[Candidate]:
    """The z-score floor: order candidates by the weighted sum of their per-tier z-scores.

    Uses each candidate's ``tier_z`` (z within the tier's whole hit list, set by
    :func:`fuse_hits`); a tier that missed a candidate contributes its lowest z among the
    candidates (-1 when the tier's scores were flat). Sets ``final_score``; ties keep fusion order.
    """
    tiers = sorted({t for c in candidates for t in c.get("tier_z", {})})
    floors = {
        t: _missing_z([c["tier_z"][t] for c in candidates if t in c["tier_z"]]) for t in tiers
    }
    scored: list[Candidate] = []
    for cand in candidates:
        total = 0.0
        for tier in tiers:
            weight = 1.0 if weights is None else weights.get(tier, 1.0)
            total += weight * cand["tier_z"].get(tier, floors[tier])
        scored.append({**cand, "final_score": total})
    return sorted(scored, key=lambda c: -c["final_score"])


def _best_scores(hits: Sequence[Hit]) -> dict[str, float]:
    """Id -> raw score in the tier's order, keeping a repeated id's first (best) score."""
    best: dict[str, float] = {}
    for hit in hits:
        score = float(hit["score"])
        if hit["id"] not in best and math.isfinite(score):
            best[hit["id"]] = score
    return best


def weights_by_name(
    weights: Mapping[str, float], roles: Mapping[str, str] | None
) -> dict[str, float]:
    """``fusion.tier_weights`` for the graph's tiers: a tier's own name first, else its role's
    (so a user's ``chroma`` tier of role ``dense`` weighs as ``dense``), else unweighted (1)."""
    out = dict(weights)
    for name, role in (roles or {}).items():
        if name not in out and role in weights:
            out[name] = weights[role]
    return out
