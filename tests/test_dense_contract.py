"""One contract for every dense backend: the embedded numpy tier and Pinecone (via the emulator).

Each test runs against both; a backend that passes can replace the other as the ``dense`` tier.
Portable filters are plain ``{key: value}`` equality; Pinecone's operators are not portable.
What any tier must do is public (``ragtiller.testing.TierContract``, run over both in
tests/test_tier_contracts.py); what stays here needs more than the ``Tier`` protocol: scores
equal to an independent cosine, and deletes and re-upserts through each backend's writer.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Protocol

import numpy as np
import pytest
from fixtures.pinecone_emulator import API_KEY, PineconeEmulator
from langchain_core.documents import Document
from langchain_pinecone import PineconeVectorStore
from pinecone import Pinecone

from ragtiller.core.tiers import Hit, SearchRequest, Tier
from ragtiller.index import DenseTier, NumpyVectorStore
from ragtiller.models import HashingEmbedder
from ragtiller.pinecone import PineconeTier, upsert_chunks

DIM = 64
EMBEDDER = HashingEmbedder(dim=DIM)


class DenseBackend(Protocol):
    """What the contract needs from a backend besides its tier."""

    tier: Tier

    def upsert(self, docs: Sequence[Document]) -> None: ...

    def delete(self, ids: list[str], namespace: str) -> None: ...


class NumpyBackend:
    def __init__(self) -> None:
        self.store = NumpyVectorStore(EMBEDDER)
        self.tier: Tier = DenseTier(self.store)

    def upsert(self, docs: Sequence[Document]) -> None:
        self.store.add_texts(
            [d.page_content for d in docs],
            [dict(d.metadata) for d in docs],
            ids=[str(d.id) for d in docs],
        )

    def delete(self, ids: list[str], namespace: str) -> None:
        self.store.delete(ids)


class PineconeBackend:
    def __init__(self, store: PineconeVectorStore) -> None:
        self.store = store
        self.tier: Tier = PineconeTier(store)

    def upsert(self, docs: Sequence[Document]) -> None:
        upsert_chunks(self.store, docs, embedder=EMBEDDER)

    def delete(self, ids: list[str], namespace: str) -> None:
        self.store.delete(ids=ids, namespace=namespace)


@pytest.fixture(params=["numpy", "pinecone"])
def backend(request: pytest.FixtureRequest) -> Iterator[DenseBackend]:
    if request.param == "numpy":
        yield NumpyBackend()
        return
    with (
        PineconeEmulator(dimension=DIM) as emulator,
        Pinecone(api_key=API_KEY).Index(host=emulator.host) as index,
    ):
        yield PineconeBackend(PineconeVectorStore(index=index, embedding=EMBEDDER))


def doc(id: str, text: str, namespace: str = "default", **metadata: Any) -> Document:
    return Document(
        id=id,
        page_content=text,
        metadata={"namespace": namespace, "source": f"{id}.md", "doc_id": f"doc-{id}", **metadata},
    )


CORPUS = [
    doc("t1", "cancel a running task with cancel", color="red", parent_id="p1"),
    doc("t2", "a cancelled task raises CancelledError", color="blue", parent_id="p1"),
    doc("t3", "wait_for applies a timeout to a task", color="red"),
    doc("l1", "the event loop runs tasks and callbacks", color="blue"),
    doc("l2", "a loop policy creates event loops", color="red"),
    doc("s1", "a stream reader reads bytes from a socket", color="green"),
    doc("q1", "queue put waits when the queue is full", namespace="api", color="red"),
    doc("q2", "queue get waits when the queue is empty", namespace="api", color="blue"),
]


def vector(text: str) -> list[float]:
    return EMBEDDER.embed_query(text)


def search(backend: DenseBackend, text: str, k: int, **kwargs: Any) -> list[Hit]:
    return backend.tier.search(SearchRequest(query=text, vector=vector(text), k=k, **kwargs))


def oracle(text: str, docs: Sequence[Document]) -> dict[str, float]:
    """Cosine of ``text`` with each document, computed independently of both backends."""
    q = np.asarray(vector(text), dtype=np.float64)
    out = {}
    for d in docs:
        v = np.asarray(vector(d.page_content), dtype=np.float64)
        out[str(d.id)] = float(q @ v / (np.linalg.norm(q) * np.linalg.norm(v)))
    return out


def in_namespace(namespace: str) -> list[Document]:
    return [d for d in CORPUS if d.metadata["namespace"] == namespace]


@pytest.mark.parametrize("query", ["cancel a task", "event loop policy", "queue waits", "bytes"])
def test_top_k_is_the_k_best_by_cosine_best_first(backend: DenseBackend, query: str) -> None:
    backend.upsert(CORPUS)
    hits = search(backend, query, k=3, namespaces=["default"])
    expected = oracle(query, in_namespace("default"))
    assert len(hits) == 3
    scores = [h["score"] for h in hits]
    assert scores == sorted(scores, reverse=True)
    assert scores == pytest.approx(sorted(expected.values(), reverse=True)[:3], abs=1e-4)
    assert all(h["score"] == pytest.approx(expected[h["id"]], abs=1e-4) for h in hits)


def test_k_larger_than_the_corpus_returns_everything(backend: DenseBackend) -> None:
    backend.upsert(CORPUS)
    hits = search(backend, "task", k=50, namespaces=["default"])
    assert sorted(h["id"] for h in hits) == sorted(str(d.id) for d in in_namespace("default"))


def test_namespaces_are_isolated(backend: DenseBackend) -> None:
    backend.upsert([*CORPUS, doc("q1-copy", CORPUS[6].page_content, namespace="other")])
    api = search(backend, "queue put waits", k=10, namespaces=["api"])
    assert {h["id"] for h in api} == {"q1", "q2"}
    assert {h["metadata"]["namespace"] for h in api} == {"api"}
    both = search(backend, "queue put waits", k=2, namespaces=["api", "other"])
    assert {h["id"] for h in both} == {"q1", "q1-copy"}
    assert both[0]["score"] == pytest.approx(both[1]["score"], abs=1e-6)
    assert search(backend, "queue put waits", k=5, namespaces=["missing"]) == []


def test_metadata_filter_is_equality(backend: DenseBackend) -> None:
    backend.upsert(CORPUS)
    hits = search(backend, "task loop", k=10, namespaces=["default"], filter={"color": "red"})
    assert sorted(h["id"] for h in hits) == ["l2", "t1", "t3"]
    hits = search(backend, "task", k=10, namespaces=["default", "api"], filter={"doc_id": "doc-q2"})
    assert [h["id"] for h in hits] == ["q2"]


def test_delete_then_search(backend: DenseBackend) -> None:
    backend.upsert(CORPUS)
    backend.delete(["t1", "t2"], namespace="default")
    hits = search(backend, "cancel a running task", k=10, namespaces=["default"])
    assert {"t1", "t2"}.isdisjoint(h["id"] for h in hits)
    assert len(hits) == len(in_namespace("default")) - 2


def test_re_upsert_with_the_same_id_replaces(backend: DenseBackend) -> None:
    backend.upsert(CORPUS)
    backend.upsert([doc("t1", "sockets and streams of bytes", color="green")])
    hits = search(backend, "sockets and streams of bytes", k=50, namespaces=["default"])
    assert [h["id"] for h in hits].count("t1") == 1
    assert len(hits) == len(in_namespace("default"))
    assert (hits[0]["id"], hits[0]["text"]) == ("t1", "sockets and streams of bytes")
    assert hits[0]["score"] == pytest.approx(1.0, abs=1e-4)
    assert hits[0]["metadata"]["color"] == "green"


def test_hit_fields(backend: DenseBackend) -> None:
    backend.upsert([*CORPUS, Document(id="bare", page_content="a bare note about tasks")])
    hits = {h["id"]: h for h in search(backend, "task", k=50, namespaces=["default"])}
    t1 = hits["t1"]
    assert (t1["doc_id"], t1["parent_id"], t1["source"]) == ("doc-t1", "p1", "t1.md")
    assert t1["metadata"] == {"namespace": "default", "color": "red"}
    bare = hits["bare"]  # no metadata: doc_id falls back to the id, parent_id to None
    assert (bare["doc_id"], bare["parent_id"], bare["source"]) == ("bare", None, "")


async def test_asearch_equals_search(backend: DenseBackend) -> None:
    backend.upsert(CORPUS)
    request = SearchRequest(
        query="q", vector=vector("event loop"), k=4, namespaces=["default", "api"]
    )
    assert await backend.tier.asearch(request) == backend.tier.search(request)
