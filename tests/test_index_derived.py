"""Derived structures (parent rows, the HNSW graph) are built at ingest, saved with
the version and opened without rebuilding."""

from __future__ import annotations

import gc
import shutil
from pathlib import Path

import numpy as np
import pytest
from langchain_core.documents import Document

from ragtiller.core.tiers import SearchRequest, Tier
from ragtiller.errors import ConfigurationError, IndexStoreError
from ragtiller.graph.builder import build_components
from ragtiller.index import DenseTier, ParentChildTier, open_index
from ragtiller.index import ann as ann_module
from ragtiller.index.ann import ANN_FILE, AnnIndex
from ragtiller.index.parent_child import PARENT_ROWS_FILE
from ragtiller.index.versions import current_version
from ragtiller.ingest import build_index
from ragtiller.models import HashingEmbedder
from ragtiller.policies import load_policy
from ragtiller.policies.schema import RetrievalPolicy
from ragtiller.ranking.query_tiers import apply_query_options

EMBEDDER = HashingEmbedder(dim=64)
TOPICS = ["wing flutter", "boundary layer", "shock wave", "heat transfer", "panel buckling"]


def corpus() -> list[Document]:
    docs = []
    for i in range(60):
        topic = TOPICS[i % len(TOPICS)]
        tenant = "acme" if i % 2 else "globex"
        text = f"# {topic} {i}\n\nNotes on {topic} number {i}.\n\n## More\n\nThe {topic} {i} data."
        docs.append(Document(page_content=text, metadata={"source": f"d{i}.md", "tenant": tenant}))
    return docs


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("derived") / "idx"
    build_index(corpus(), embedder=EMBEDDER, progress=False).save(directory)
    return directory


def copy(saved: Path, tmp_path: Path) -> Path:
    target = tmp_path / "idx"
    shutil.copytree(saved, target)
    return target


def requests() -> list[SearchRequest]:
    return [
        SearchRequest(query=t, vector=EMBEDDER.embed_query(t), k=5, filter=f)
        for t in TOPICS
        for f in (None, {"tenant": "acme"})
    ]


def test_ingest_saves_them_and_open_reads_them(saved: Path) -> None:
    version = current_version(saved)
    assert (version / PARENT_ROWS_FILE).is_file()
    assert not (version / "section_lexical").exists()  # no shipped path reads section BM25
    assert not (version / ANN_FILE).exists()  # 60 documents: far below the graph's threshold
    index = open_index(saved)
    assert index._derived.parent_rows is not None
    built = build_index(corpus(), embedder=EMBEDDER, progress=False)
    for request in requests():
        assert index.tiers[1].search(request) == built.tiers[1].search(request)


def test_corrupt_parent_rows_fail_the_open_naming_the_file(saved: Path, tmp_path: Path) -> None:
    directory = copy(saved, tmp_path)
    path = current_version(directory) / PARENT_ROWS_FILE
    np.save(path, np.full(3, 10**6, dtype=np.int64))
    with pytest.raises(IndexStoreError, match=r"parent_rows\.npy is corrupt: expected"):
        open_index(directory)


@pytest.fixture(scope="module")
def with_graph(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("graph") / "idx"
    patch = pytest.MonkeyPatch()
    patch.setattr(ann_module, "ANN_MIN_ROWS", 10)  # a small index gets a graph
    try:
        build_index(corpus(), embedder=EMBEDDER, progress=False).save(directory)
    finally:
        patch.undo()
    return directory


def policy_with(search: str) -> RetrievalPolicy:
    policy = load_policy(None)
    return policy.model_copy(
        update={"dense_backend": policy.dense_backend.model_copy(update={"search": search})}
    )


def approximate(tier: Tier) -> bool:
    """Whether the embedded vector tier (under Rocchio's wrapper, if any) searches the graph."""
    inner = getattr(tier, "inner", tier)
    assert isinstance(inner, DenseTier | ParentChildTier)
    return inner.approximate


def test_ingest_saves_the_graph_and_auto_searches_it(with_graph: Path) -> None:
    assert (current_version(with_graph) / ANN_FILE).is_file()
    index = open_index(with_graph)
    assert isinstance(index.store.ann, AnnIndex) and index.store.ann.rows == len(index.store)
    auto = dict(build_components(None, index=index).tiers)
    exact = {t.name: t for t in apply_query_options(policy_with("exact"), index.tiers, index)}
    for name in ("dense", "parent_child"):
        assert approximate(auto[name]) and not approximate(exact[name])
    for request in requests():
        for name in ("dense", "parent_child"):
            hits = auto[name].search(request)
            assert hits
            if request.filter and name == "dense":
                assert {h["metadata"]["tenant"] for h in hits} == {"acme"}


def test_the_graph_is_saved_atomically_with_the_version(with_graph: Path, tmp_path: Path) -> None:
    index = open_index(with_graph)
    steps: list[str] = []

    def fault(step: str) -> None:
        steps.append(step)
        if step == f"write {ANN_FILE}":
            raise OSError(28, "No space left on device")

    with pytest.raises(IndexStoreError, match=r"write ann\.faiss failed"):
        index.save(tmp_path / "idx", fault=fault)
    assert "write manifest.json" not in steps  # the graph is written before the manifest
    assert not (tmp_path / "idx" / "CURRENT").exists()  # no version became current


def test_approximate_without_a_graph_builds_one_on_use(saved: Path) -> None:
    index = open_index(saved)
    assert index.store.ann is None
    tiers = apply_query_options(policy_with("approximate"), index.tiers, index)
    dense = next(t for t in tiers if t.name == "dense")
    assert isinstance(index.store.ann, AnnIndex)
    assert approximate(dense)


def test_approximate_tiers_without_an_index_or_graph_are_refused() -> None:
    index = build_index(corpus()[:5], embedder=EMBEDDER, progress=False)
    bare: list[Tier] = [DenseTier(index.store), ParentChildTier(index.store, index.parents)]
    with pytest.raises(ConfigurationError, match="no HNSW graph"):
        apply_query_options(policy_with("approximate"), bare, None)


def test_an_index_with_a_graph_holds_one_copy_of_the_vectors(with_graph: Path) -> None:
    stored = np.load(current_version(with_graph) / "vectors.npy")
    vectors = open_index(with_graph).store.vectors  # the graph's copy: vectors.npy is not read
    assert not isinstance(vectors, np.memmap) and not vectors.flags.writeable
    gc.collect()  # the index is gone; the array keeps the graph that owns its memory alive
    assert np.array_equal(vectors, stored)


def test_a_graph_of_other_vectors_fails_the_open(with_graph: Path, tmp_path: Path) -> None:
    directory = copy(with_graph, tmp_path)
    path = current_version(directory) / "vectors.npy"
    np.save(path, np.load(path)[:, :32].copy())
    with pytest.raises(IndexStoreError, match=r"shape \(\d+, 32\), the graph \(\d+, 64\)"):
        open_index(directory)
