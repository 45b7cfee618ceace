import math

import pytest

from ragtiller.eval.metrics import (
    dcg_at_k,
    mrr_at_k,
    ndcg_at_k,
    percentile,
    recall_at_k,
    score_query,
)

GRADES = {"a": 3, "b": 2, "c": 0, "d": 1}


def test_ndcg_uses_graded_gains_and_log2_discount() -> None:
    # ranks: b(2) x(0) a(3) d(1); ideal: a(3) b(2) d(1)
    dcg = 2 / 1 + 0 + 3 / 2 + 1 / math.log2(5)
    ideal = 3 / 1 + 2 / math.log2(3) + 1 / 2
    assert ndcg_at_k(["b", "x", "a", "d"], GRADES, 10) == pytest.approx(dcg / ideal)


def test_ndcg_perfect_ranking_is_one_and_ties_in_grade_are_interchangeable() -> None:
    assert ndcg_at_k(["a", "b", "d"], GRADES) == pytest.approx(1.0)
    assert ndcg_at_k(["b", "a"], {"a": 2, "b": 2}) == pytest.approx(1.0)


def test_ndcg_cuts_at_k_and_ideal_counts_unretrieved_judgments() -> None:
    # Only one of two equally relevant docs retrieved.
    assert ndcg_at_k(["a"], {"a": 1, "b": 1}, 10) == pytest.approx(1 / (1 + 1 / math.log2(3)))
    # The relevant doc at rank 3 is outside k=2.
    assert ndcg_at_k(["x", "y", "a"], {"a": 1}, 2) == 0.0


def test_repeated_ids_count_once() -> None:
    assert ndcg_at_k(["x", "x", "a"], {"a": 1}) == pytest.approx(1 / math.log2(3))
    assert mrr_at_k(["x", "x", "a"], {"a": 1}) == pytest.approx(1 / 2)


def test_mrr_is_first_positive_grade_within_k() -> None:
    assert mrr_at_k(["c", "x", "d", "a"], GRADES) == pytest.approx(1 / 3)
    ranking = [f"n{i}" for i in range(10)] + ["a"]
    assert mrr_at_k(ranking, GRADES, 10) == 0.0
    assert mrr_at_k(ranking, GRADES, 11) == pytest.approx(1 / 11)


def test_recall_at_k_larger_than_the_list() -> None:
    assert recall_at_k(["a", "x"], GRADES, 100) == pytest.approx(1 / 3)
    assert recall_at_k([], GRADES, 10) == 0.0
    assert recall_at_k(["d", "b", "a"], GRADES, 2) == pytest.approx(2 / 3)


@pytest.mark.parametrize("grades", [{}, {"a": 0}, {"a": -1, "b": 0}])
def test_query_without_relevant_docs_has_no_metrics(grades: dict[str, int]) -> None:
    assert ndcg_at_k(["a"], grades) is None
    assert mrr_at_k(["a"], grades) is None
    assert recall_at_k(["a"], grades, 10) is None
    assert score_query(["a"], grades) is None


def test_negative_grades_are_not_relevant() -> None:
    assert ndcg_at_k(["x", "a"], {"x": -1, "a": 1}) == pytest.approx(1 / math.log2(3))


def test_score_query_bundles_every_metric() -> None:
    scores = score_query(["b", "a"], {"a": 2, "b": 1})
    assert scores is not None
    assert scores.ndcg_at_10 == pytest.approx((1 + 2 / math.log2(3)) / (2 + 1 / math.log2(3)))
    assert (scores.mrr_at_10, scores.recall_at_10, scores.recall_at_100) == (1.0, 1.0, 1.0)


@pytest.mark.parametrize("metric", [dcg_at_k, ndcg_at_k, mrr_at_k, recall_at_k])
def test_k_must_be_positive(metric: object) -> None:
    args = ([1.0], 0) if metric is dcg_at_k else (["a"], {"a": 1}, 0)
    with pytest.raises(ValueError, match="k must be > 0, but got 0"):
        metric(*args)  # type: ignore[operator]


def test_percentile() -> None:
    assert percentile([], 95) is None
    assert percentile([10.0, 20.0, 30.0, 40.0, 50.0], 50) == 30.0
    assert percentile([0.0, 100.0], 95) == pytest.approx(95.0)
