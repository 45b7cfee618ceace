"""Ranking metrics with graded gains, checked against hand-computed values in the tests.

Conventions (trec_eval style):

* a document is relevant when its grade is ``> 0``; unjudged documents have grade 0;
* the ranking is read best first; repeated ids after their first occurrence are ignored;
* DCG@k = sum over ranks i = 1..k of ``grade_i / log2(i + 1)`` (gain = grade, not 2^grade - 1);
  the ideal DCG sorts every judged grade, not just the retrieved ones;
* a query with no relevant document has no defined NDCG, MRR or recall: :func:`score_query`
  returns None for it, and averages leave it out and count it instead.

Answer metrics (QA datasets) read, per returned passage in order, whether it holds an answer:
answer hit@k is whether one of the first k does, and answer RR@k the reciprocal rank of the
first that does (0 when none does within k).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np


def _unique(ranking: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(ranking))


def dcg_at_k(grades: Sequence[float], k: int) -> float:
    """Discounted cumulative gain of ``grades`` (best first) over the first ``k``.

    Example:
        >>> dcg_at_k([3, 2], k=10)  # 3 / log2(2) + 2 / log2(3)
        4.2618595071429155
    """
    if k <= 0:
        raise ValueError(f"k must be > 0, but got {k}")
    return math.fsum(g / math.log2(i + 2) for i, g in enumerate(grades[:k]) if g > 0)


def ndcg_at_k(ranking: Sequence[str], grades: Mapping[str, int], k: int = 10) -> float | None:
    """NDCG@k with graded gains; None when no document has grade ``> 0``.

    Example:
        >>> ndcg_at_k(["b", "a"], {"a": 2, "b": 1}, k=10)
        0.8597186998521972
    """
    ideal = dcg_at_k(sorted(grades.values(), reverse=True), k)
    if ideal == 0.0:
        return None
    return dcg_at_k([grades.get(i, 0) for i in _unique(ranking)], k) / ideal


def mrr_at_k(ranking: Sequence[str], grades: Mapping[str, int], k: int = 10) -> float | None:
    """Reciprocal rank of the first document with grade ``> 0`` within ``k``; 0 when none.

    None when no document has grade ``> 0``.
    """
    if k <= 0:
        raise ValueError(f"k must be > 0, but got {k}")
    if not any(g > 0 for g in grades.values()):
        return None
    for rank, doc_id in enumerate(_unique(ranking)[:k], start=1):
        if grades.get(doc_id, 0) > 0:
            return 1.0 / rank
    return 0.0


def recall_at_k(ranking: Sequence[str], grades: Mapping[str, int], k: int) -> float | None:
    """Share of the relevant documents (grade ``> 0``) found within ``k``; None when none exist."""
    if k <= 0:
        raise ValueError(f"k must be > 0, but got {k}")
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
    """Every metric of one query; None when the query has no relevant document."""
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
    if k <= 0:
        raise ValueError(f"k must be > 0, but got {k}")
    return any(hits[:k])


def answer_rr_at_k(hits: Sequence[bool], k: int = 10) -> float:
    """Reciprocal rank of the first passage holding an answer within ``k``; 0 when none.

    Example:
        >>> answer_rr_at_k([False, False, True]), answer_rr_at_k([False] * 12 + [True])
        (0.3333333333333333, 0.0)
    """
    if k <= 0:
        raise ValueError(f"k must be > 0, but got {k}")
    for rank, hit in enumerate(hits[:k], start=1):
        if hit:
            return 1.0 / rank
    return 0.0


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (0-100, linear interpolation); None for no values."""
    if not values:
        return None
    return float(np.percentile(np.asarray(values, dtype=float), q))
