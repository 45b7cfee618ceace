"""The approximate (HNSW) dense tier: the public tier contract, exact filters, recall, persistence."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from ragtiller.core.tiers import SearchRequest, Tier
from ragtiller.errors import IndexStoreError
from ragtiller.index import DenseTier, NumpyVectorStore, ParentChildTier
from ragtiller.index import ann as ann_module
from ragtiller.index.ann import AnnIndex
from ragtiller.index.records import RecordTable
from ragtiller.models import HashingEmbedder
from ragtiller.testing import TierContract, TierFactory

DIM = 32


def approximate_store(docs: Sequence[Document], embedder: Embeddings) -> NumpyVectorStore:
    store = NumpyVectorStore(embedder)
    store.add_texts(
        [d.page_content for d in docs],
        [dict(d.metadata) for d in docs],
        ids=[str(d.id) for d in docs],
    )
    store.attach_ann(AnnIndex.build(store.vectors))
    return store


class TestApproximateDenseTier(TierContract):
    @pytest.fixture
    def make_tier(self, contract_embedder: Embeddings) -> TierFactory:
        def make(docs: Sequence[Document]) -> Tier:
            return DenseTier(approximate_store(docs, contract_embedder), approximate=True)

        return make


class TestApproximateDenseTierThroughTheGraph(TestApproximateDenseTier):
    """The same contract with the exact fallback for small scopes switched off, so filtered
    searches go through the graph and its ID selector."""

    @pytest.fixture(autouse=True)
    def graph_only(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(ann_module, "EXACT_SCOPE_ROWS", 0)
        monkeypatch.setattr(ann_module, "EXACT_SCOPE_SHARE", 0.0)


def clustered(rows: int, seed: int = 0) -> np.ndarray:
    """Unit vectors around 60 fixed topics (as embeddings cluster), a different draw per seed."""
    centres = np.random.default_rng(0).standard_normal((60, DIM)).astype(np.float32)
    rng = np.random.default_rng(seed)
    points = centres[rng.integers(0, len(centres), rows)]
    points += 0.5 * rng.standard_normal((rows, DIM)).astype(np.float32)
    points /= np.linalg.norm(points, axis=1, keepdims=True)
    return points


@pytest.fixture(scope="module")
def tenants_store() -> NumpyVectorStore:
    """6,000 rows: tenants acme and globex alternate, every 200th row belongs to initech."""
    vectors = clustered(6000)
    metadatas = [
        {"tenant": "initech" if r % 200 == 0 else ("acme" if r % 2 else "globex")}
        for r in range(len(vectors))
    ]
    store = NumpyVectorStore.from_vectors(
        [f"row {r}" for r in range(len(vectors))],
        vectors,
        HashingEmbedder(DIM),
        metadatas,
        ids=[f"r{r}" for r in range(len(vectors))],
    )
    store.attach_ann(AnnIndex.build(store.vectors))
    return store


@pytest.mark.parametrize("tenant", ["acme", "globex", "initech"])
@pytest.mark.parametrize("forced", [False, True])
def test_a_tenant_filter_holds_exactly_on_the_graph(
    tenants_store: NumpyVectorStore, tenant: str, forced: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if forced:  # every filtered search through the graph's selector, none through the fallback
        monkeypatch.setattr(ann_module, "EXACT_SCOPE_ROWS", 0)
        monkeypatch.setattr(ann_module, "EXACT_SCOPE_SHARE", 0.0)
    queries = clustered(40, seed=1)
    metadatas = tenants_store.records.metadatas
    in_scope = sum(md["tenant"] == tenant for md in metadatas)
    recall = []
    for query in queries:
        scope = {"tenant": tenant}
        approx = tenants_store.search_rows(query.tolist(), 20, approximate=True, filter=scope)
        exact = tenants_store.search_rows(query.tolist(), 20, filter=scope)
        assert all(metadatas[row]["tenant"] == tenant for row, _ in approx)
        assert len(approx) == min(20, in_scope)
        recall.append(len({r for r, _ in approx} & {r for r, _ in exact}) / len(exact))
    assert np.mean(recall) >= 0.9


def test_a_scope_smaller_than_k_returns_all_of_it(tenants_store: NumpyVectorStore) -> None:
    query = clustered(1, seed=2)[0].tolist()
    hits = tenants_store.search_rows(query, 100, approximate=True, filter={"tenant": "initech"})
    assert {row for row, _ in hits} == set(range(0, 6000, 200))
    assert [s for _, s in hits] == sorted((s for _, s in hits), reverse=True)


def test_recall_at_10_against_the_exact_scan(tenants_store: NumpyVectorStore) -> None:
    found = 0
    queries = clustered(50, seed=3)
    for query in queries:
        approx = {r for r, _ in tenants_store.search_rows(query.tolist(), 10, approximate=True)}
        exact = {r for r, _ in tenants_store.search_rows(query.tolist(), 10)}
        found += len(approx & exact)
    assert found / (10 * len(queries)) >= 0.98


def test_scores_are_the_exact_cosines(tenants_store: NumpyVectorStore) -> None:
    query = clustered(1, seed=4)[0]
    for row, score in tenants_store.search_rows(query.tolist(), 10, approximate=True):
        assert score == pytest.approx(float(tenants_store.vectors[row] @ query), abs=1e-5)


def test_approximate_search_without_a_graph_is_refused() -> None:
    store = NumpyVectorStore.from_texts(["a b", "c d"], HashingEmbedder(DIM))
    with pytest.raises(ValueError, match="HNSW graph"):
        DenseTier(store, approximate=True)
    with pytest.raises(ValueError, match="attach_ann"):
        store.search_rows([1.0] * DIM, 1, approximate=True)


def test_a_write_drops_the_graph(tenants_store: NumpyVectorStore) -> None:
    store = NumpyVectorStore.from_texts(["a b", "c d"], HashingEmbedder(DIM))
    store.attach_ann(AnnIndex.build(store.vectors))
    store.add_texts(["e f"])
    assert store.ann is None  # a graph over the old rows never answers for the new ones
    with pytest.raises(ValueError, match="2 32-d rows, the store 3 32-d"):
        store.attach_ann(AnnIndex.build(store.vectors[:2]))


def test_the_graph_round_trips_and_a_mismatch_is_refused(
    tenants_store: NumpyVectorStore, tmp_path: Path
) -> None:
    ann = tenants_store.ann
    assert ann is not None
    ann.save(tmp_path / "ann.faiss")
    loaded = AnnIndex.load(tmp_path / "ann.faiss", rows=6000, dimension=DIM)
    query = clustered(1, seed=5)[0]
    vectors = tenants_store.vectors
    assert loaded.search(query, 10, vectors, None)[0].tolist() == (
        ann.search(query, 10, vectors, None)[0].tolist()
    )
    with pytest.raises(IndexStoreError, match="holds 6000 32-dimensional vectors, the index 5999"):
        AnnIndex.load(tmp_path / "ann.faiss", rows=5999, dimension=DIM)
    (tmp_path / "bad.faiss").write_bytes(b"not an index")
    with pytest.raises(IndexStoreError, match=r"bad\.faiss is corrupt"):
        AnnIndex.load(tmp_path / "bad.faiss", rows=6000, dimension=DIM)


def test_the_parent_child_tier_ranks_parents_among_the_graphs_children(
    tenants_store: NumpyVectorStore,
) -> None:
    records = tenants_store.records
    parents = RecordTable(
        [f"p{p}" for p in range(1500)],
        [f"section {p}" for p in range(1500)],
        [{"doc_id": f"d{p}"} for p in range(1500)],
    )
    metadatas = [{**md, "parent_id": f"p{r // 4}"} for r, md in enumerate(records.metadatas)]
    store = NumpyVectorStore.from_vectors(
        list(records.texts),
        tenants_store.vectors,
        HashingEmbedder(DIM),
        metadatas,
        ids=list(records.ids),
    )
    store.attach_ann(AnnIndex.build(store.vectors))
    exact = ParentChildTier(store, parents)
    approx = exact.with_search(True)
    assert approx.approximate and approx.with_search(False).approximate is False
    agree = 0
    queries = clustered(20, seed=6)
    for query in queries:
        request = SearchRequest(query="", vector=query.tolist(), k=10, filter={"tenant": "acme"})
        got = approx.search(request)
        children = [c for h in got for c in h["metadata"]["matched_child_ids"]]
        tenants = {d.metadata["tenant"] for d in store.get_by_ids(children)}
        assert children and tenants == {"acme"}
        agree += len(
            {h["parent_id"] for h in got} & {h["parent_id"] for h in exact.search(request)}
        )
    assert agree / (10 * len(queries)) >= 0.9
