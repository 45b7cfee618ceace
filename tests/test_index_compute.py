"""Exact top-k: the threshold fast path returns what one partition of every score returns."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest

from ragtiller.index import compute


def _cases() -> list[tuple[str, npt.NDArray[np.float32], int]]:
    rng = np.random.default_rng(28)
    cases: list[tuple[str, npt.NDArray[np.float32], int]] = []
    for trial in range(600):
        n = int(rng.integers(compute.THRESHOLD_MIN_ROWS, 40_000))
        k = int(rng.integers(1, 400))
        kind = trial % 6
        if kind == 0:  # distinct scores
            scores = rng.standard_normal(n).astype(np.float32)
        elif kind == 1:  # few distinct values: ties everywhere
            scores = rng.integers(0, 50, n).astype(np.float32)
        elif kind == 2:  # rounded: ties near the top
            scores = np.round(rng.random(n), 3).astype(np.float32)
        elif kind == 3:  # sorted, best first: the bound's blocks are uneven
            scores = np.sort(rng.random(n)).astype(np.float32)[::-1].copy()
        elif kind == 4:  # sparse, as BM25 of rows sharing a term
            scores = np.zeros(n, dtype=np.float32)
            rows = rng.choice(n, int(rng.integers(1, n)), replace=False)
            scores[rows] = rng.random(len(rows))
        else:  # one NaN or -inf somewhere
            scores = rng.random(n).astype(np.float32)
            scores[int(rng.integers(0, n))] = np.nan if trial % 12 == 5 else -np.inf
        cases.append((f"kind{kind}-n{n}-k{k}", scores, k))
    return cases


def test_top_k_equals_one_partition_of_every_score() -> None:
    fast = 0
    for name, scores, k in _cases():
        expected = compute._partitioned(scores, k)
        assert compute.top_k(scores, k).tolist() == expected.tolist(), name
        fast += compute._above_threshold(scores, k) is not None
    assert fast > 100  # the fast path served many of them, not only the fallback


def test_a_tie_at_the_kth_place_falls_back_to_the_partition() -> None:
    scores = np.zeros(10_000, dtype=np.float32)
    scores[[7, 70, 700, 7000]] = [3.0, 2.0, 2.0, 1.0]
    assert compute._above_threshold(scores, 2) is None
    assert compute.top_k(scores, 2).tolist() == compute._partitioned(scores, 2).tolist()
    assert compute.top_k(scores, 3).tolist() == [7, 70, 700]


@pytest.mark.parametrize("rows", [100_000, 1_000_000])
def test_the_fast_path_serves_distinct_scores(rows: int) -> None:
    scores = np.random.default_rng(rows).random(rows).astype(np.float32)
    got = compute._above_threshold(scores, 100)
    assert got is not None
    assert got.tolist() == compute._partitioned(scores, 100).tolist()
