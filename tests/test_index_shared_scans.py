"""One vector scan per query per store, shared by the dense and parent-child tiers."""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np
import pytest

from ragtiller.core.tiers import SearchRequest
from ragtiller.index import DenseTier, NumpyVectorStore, ParentChildTier, dense
from ragtiller.index.compute import SharedScans
from ragtiller.index.records import RecordTable
from ragtiller.models import HashingEmbedder

DIM = 16


@pytest.fixture
def store() -> NumpyVectorStore:
    rng = np.random.default_rng(7)
    rows = 40
    metadatas = [
        {"namespace": "default" if r % 4 else "other", "parent_id": f"p{r // 4}", "lang": "en"}
        for r in range(rows)
    ]
    return NumpyVectorStore.from_vectors(
        [f"chunk {r}" for r in range(rows)],
        rng.standard_normal((rows, DIM), dtype=np.float32),
        HashingEmbedder(DIM),
        metadatas,
        ids=[f"c{r}" for r in range(rows)],
    )


@pytest.fixture
def scans(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the store's full scans (the mat-vec), in the module under test."""
    calls: list[int] = []
    cosines = dense._cosines

    def counted(vectors: Any, query: Any) -> Any:
        calls.append(len(vectors))
        return cosines(vectors, query)

    monkeypatch.setattr(dense, "_cosines", counted)
    return calls


def parents() -> RecordTable:
    return RecordTable([f"p{p}" for p in range(10)], [f"section {p}" for p in range(10)], [{}] * 10)


def test_dense_and_parent_child_share_one_scan(store: NumpyVectorStore, scans: list[int]) -> None:
    vector = np.ones(DIM).tolist()
    dense_hits = DenseTier(store).search(
        SearchRequest(query="", vector=vector, k=5, namespaces=["default"])
    )
    pc_hits = ParentChildTier(store, parents()).search(
        SearchRequest(query="", vector=vector, k=3, namespaces=["default"])
    )
    assert scans == [40]
    assert dense_hits[0]["id"] in pc_hits[0]["metadata"]["matched_child_ids"]


def test_shared_scan_gives_the_same_hits_as_a_fresh_one(
    store: NumpyVectorStore, scans: list[int]
) -> None:
    vector = np.linspace(-1, 1, DIM).tolist()
    first = store.search_rows(vector, 6, namespaces=["default"], filter={"lang": "en"})
    again = store.search_rows(vector, 6, namespaces=["default"], filter={"lang": "en"})
    fresh = NumpyVectorStore.from_vectors(
        [store.records.texts[r] for r in range(len(store))],
        store.vectors,
        HashingEmbedder(DIM),
        [dict(md) for md in store.records.metadatas],
    ).search_rows(vector, 6, namespaces=["default"], filter={"lang": "en"})
    assert first == again
    assert [score for _, score in first] == [score for _, score in fresh]
    assert all(store.records.metadatas[row]["namespace"] == "default" for row, _ in first)
    assert scans == [40, 40]  # once for ``store``, once for ``fresh``


def test_other_namespaces_filters_or_vectors_scan_again(
    store: NumpyVectorStore, scans: list[int]
) -> None:
    vector = np.ones(DIM).tolist()
    store.score_rows(vector, namespaces=["default"])
    store.score_rows(vector, namespaces=["other"])
    store.score_rows(vector, namespaces=["default"], filter={"lang": "en"})
    store.score_rows(np.arange(DIM).tolist(), namespaces=["default"])
    assert len(scans) == 4
    rows, _ = store.score_rows(vector, namespaces=["other"])
    assert rows.tolist() == [r for r in range(40) if r % 4 == 0]
    assert len(scans) == 4


def test_a_write_drops_the_shared_scans(store: NumpyVectorStore) -> None:
    vector = HashingEmbedder(DIM).embed_query("brand new text")
    before = store.search_rows(vector, 1)
    store.add_texts(["brand new text"], [{"namespace": "default"}], ids=["new"])
    row, score = store.search_rows(vector, 1)[0]
    assert store.records.ids[row] == "new" and score == pytest.approx(1.0)
    assert before[0][1] < 0.99


def test_shared_results_are_read_only(store: NumpyVectorStore) -> None:
    rows, scores = store.score_rows(np.ones(DIM).tolist(), namespaces=["default"])
    with pytest.raises(ValueError, match="read-only"):
        scores[0] = 1.0
    with pytest.raises(ValueError, match="read-only"):
        rows[0] = 0


def test_a_scan_is_shared_only_by_filters_that_match_the_same_values(
    store: NumpyVectorStore, scans: list[int]
) -> None:
    vector = np.ones(DIM).tolist()
    for value in (["en"], ["en"], 1, 1.0, True):  # a list is shared too; True is not 1
        store.score_rows(vector, filter={"lang": value})
    assert len(scans) == 3


def test_concurrent_askers_wait_for_one_scan() -> None:
    shared = SharedScans()
    started, release = threading.Event(), threading.Event()
    runs: list[str] = []

    def slow_scan() -> str:
        runs.append("scan")
        started.set()
        release.wait(5)
        return "scores"

    results: list[str] = []
    first = threading.Thread(target=lambda: results.append(shared.get("k", slow_scan)))
    first.start()
    assert started.wait(5)
    second = threading.Thread(target=lambda: results.append(shared.get("k", slow_scan)))
    second.start()
    time.sleep(0.05)  # the second asker is now waiting on the first one's scan
    release.set()
    first.join(5)
    second.join(5)
    assert results == ["scores", "scores"] and runs == ["scan"]


def test_a_failed_scan_is_not_kept() -> None:
    shared = SharedScans()
    attempts: list[int] = []

    def flaky() -> int:
        attempts.append(1)
        if len(attempts) == 1:
            raise RuntimeError("disk hiccup")
        return 42

    with pytest.raises(RuntimeError, match="disk hiccup"):
        shared.get("k", flaky)
    assert shared.get("k", flaky) == 42
    assert shared.get("k", flaky) == 42 and len(attempts) == 2


def test_only_the_last_scans_are_kept() -> None:
    shared = SharedScans(kept=2)
    for key in ("a", "b", "c"):
        shared.get(key, lambda key=key: key)
    recomputed: list[str] = []
    shared.get("a", lambda: recomputed.append("a") or "a")
    shared.get("c", lambda: recomputed.append("c") or "c")
    assert recomputed == ["a"]
