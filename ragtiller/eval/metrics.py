"""Ranking metrics, trec_eval style: relevant means grade ``> 0``, repeated ids count once, the
gain is the grade, the ideal DCG sorts every judged grade, and a query with no relevant
document has no NDCG, MRR or recall (None: averages leave it out and count it instead)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np


def _unique(ranking: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(ranking))


def _check(k: int) -> None:
    if k <= 0:
        raise ValueError(f"k must be > 0, but got {k}")


def dcg_at_k(grades: Sequence[float], k: int) -> float:
    """Discounted cumulative gain of ``grades`` (best first) over the first ``k``."""
    _check(k)
    return math.fsum(g / math.log2(i + 2) for i, g in enumerate(grades[:k]) if g > 0)


def ndcg_at_k(ranking: Sequence[str], grades: Mapping[str, int], k: int = 10) -> float | None:
    """NDCG@k with graded gains; None when no document has grade ``> 0``."""
    ideal = dcg_at_k(sorted(grades.values(), reverse=True), k)
    if ideal == 0.0:
        return None
    return dcg_at_k([grades.get(i, 0) for i in _unique(ranking)], k) / ideal


def mrr_at_k(ranking: Sequence[str], grades: Mapping[str, int], k: int = 10) -> float | None:
    """Reciprocal rank of the first relevant document within ``k`` (0 when none)."""
    _check(k)
    if not any(g > 0 for g in grades.values()):
        return None
    return answer_rr_at_k([grades.get(d, 0) > 0 for d in _unique(ranking)], k)


def recall_at_k(ranking: Sequence[str], grades: Mapping[str, int], k: int) -> float | None:
    """Share of the relevant documents found within ``k``."""
    _check(k)
    relevant = {d for d, g in grades.items() if g > 0}
    if not relevant:
        return None
    return len(relevant.intersection(_unique(ranking)[:k])) / len(relevant)


@dataclass(frozen=True)
class QueryScores:
    """The quality metrics of one query's ranking."""

    ndcg_at_10: float
    mrr_at_10: float
    recall_at_10: float
    recall_at_100: float


def score_query(ranking: Sequence[str], grades: Mapping[str, int]) -> QueryScores | None:
    """Every metric of one query (None when it has no relevant document)."""
    ndcg, mrr = ndcg_at_k(ranking, grades, 10), mrr_at_k(ranking, grades, 10)
    r10, r100 = recall_at_k(ranking, grades, 10), recall_at_k(ranking, grades, 100)
    if ndcg is None or mrr is None or r10 is None or r100 is None:
        return None
    return QueryScores(ndcg_at_10=ndcg, mrr_at_10=mrr, recall_at_10=r10, recall_at_100=r100)


def answer_hit_at_k(hits: Sequence[bool], k: int) -> bool:
    """Whether one of the first ``k`` passages holds an answer.

    Example:
        >>> answer_hit_at_k([False, True], 1), answer_hit_at_k([False, True], 5)
        (False, True)
    """
    _check(k)
    return any(hits[:k])


def answer_rr_at_k(hits: Sequence[bool], k: int = 10) -> float:
    """Reciprocal rank of the first passage holding an answer within ``k``; 0 when none.

    Example:
        >>> answer_rr_at_k([False, False, True]), answer_rr_at_k([False] * 12 + [True])
        (0.3333333333333333, 0.0)
    """
    _check(k)
    return next((1.0 / rank for rank, hit in enumerate(hits[:k], start=1) if hit), 0.0)


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (0-100, linear interpolation)."""
    return float(np.percentile(np.asarray(values, dtype=float), q)) if values else None
