"""NumpyVectorStore used the way a LangChain user uses any VectorStore."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest
from langchain_core.documents import Document
from langchain_core.vectorstores import VectorStore, VectorStoreRetriever

from ragtiller.errors import IndexStoreError
from ragtiller.index import NumpyVectorStore
from ragtiller.models import HashingEmbedder

EMBEDDER = HashingEmbedder(dim=64)
TEXTS = ["red apples are sweet", "the blue sea is deep", "green apples are sour"]


@pytest.fixture
def store() -> NumpyVectorStore:
    return NumpyVectorStore.from_texts(
        TEXTS,
        EMBEDDER,
        metadatas=[{"color": "red"}, {"color": "blue"}, {"color": "green"}],
        ids=["r", "b", "g"],
    )


def test_it_is_a_langchain_vector_store(store: NumpyVectorStore) -> None:
    assert isinstance(store, VectorStore)
    assert store.embeddings is EMBEDDER


def test_similarity_search_with_score_returns_documents_and_cosines(
    store: NumpyVectorStore,
) -> None:
    pairs = store.similarity_search_with_score("sweet red apples", k=2)
    assert [d.id for d, _ in pairs] == ["r", "g"]
    query = np.array(EMBEDDER.embed_query("sweet red apples"))
    expected = float(query @ np.array(EMBEDDER.embed_query(TEXTS[0])))
    assert pairs[0][1] == pytest.approx(expected, abs=1e-6)
    assert pairs[0][1] > pairs[1][1]
    assert pairs[0][0] == Document(id="r", page_content=TEXTS[0], metadata={"color": "red"})


def test_search_by_vector_and_by_text_agree(store: NumpyVectorStore) -> None:
    by_text = store.similarity_search("deep sea", k=3)
    by_vector = store.similarity_search_by_vector(EMBEDDER.embed_query("deep sea"), k=3)
    assert by_text == by_vector and by_text[0].id == "b" and len(by_text) == 3


def test_filter_and_namespaces_narrow_the_search(store: NumpyVectorStore) -> None:
    assert [d.id for d in store.similarity_search("apples", k=5, filter={"color": "green"})] == [
        "g"
    ]
    store.add_texts(["apples in another namespace"], [{"namespace": "other"}], ids=["o"])
    assert [d.id for d in store.similarity_search("apples", k=5, namespaces=["other"])] == ["o"]
    assert "o" not in [d.id for d in store.similarity_search("apples", k=5, namespaces=["default"])]


def test_add_texts_generates_ids_and_upserts_existing_ones(store: NumpyVectorStore) -> None:
    new_ids = store.add_texts(["a yellow banana"])
    assert len(new_ids) == 1 and len(new_ids[0]) == 32
    assert store.add_texts(["purple plums replace red apples"], ids=["r"]) == ["r"]
    assert len(store) == 4
    assert store.get_by_ids(["r"])[0].page_content == "purple plums replace red apples"
    assert store.similarity_search("purple plums", k=1)[0].id == "r"


def test_add_documents_keeps_document_ids(store: NumpyVectorStore) -> None:
    store.add_documents([Document(id="d1", page_content="orange juice", metadata={"k": 1})])
    assert store.get_by_ids(["d1"]) == [
        Document(id="d1", page_content="orange juice", metadata={"k": 1})
    ]


def test_get_by_ids_skips_unknown_ids_and_keeps_order(store: NumpyVectorStore) -> None:
    assert [d.id for d in store.get_by_ids(["g", "missing", "r"])] == ["g", "r"]


def test_delete_removes_rows_from_search_and_lookup(store: NumpyVectorStore) -> None:
    assert store.delete(["r", "missing"]) is True
    assert store.get_by_ids(["r"]) == []
    assert "r" not in [d.id for d in store.similarity_search("red apples", k=5)]
    assert store.delete(["missing"]) is False
    assert store.delete() is True and len(store) == 0
    assert store.similarity_search("anything") == []


def test_empty_store_accepts_its_first_texts() -> None:
    store = NumpyVectorStore(EMBEDDER)
    assert store.similarity_search("x") == []
    assert store.add_texts([]) == []
    store.add_texts(["first text"], ids=["1"])
    assert store.similarity_search("first", k=1)[0].id == "1"


def test_length_mismatches_and_duplicate_ids_are_rejected(store: NumpyVectorStore) -> None:
    with pytest.raises(ValueError, match="got 1 metadatas for 2 texts"):
        store.add_texts(["a", "b"], [{}])
    with pytest.raises(ValueError, match="got 1 ids for 2 texts"):
        store.add_texts(["a", "b"], ids=["x"])
    with pytest.raises(ValueError, match=r"ids must be unique, but these repeat: \['x'\]"):
        store.add_texts(["a", "b"], ids=["x", "x"])
    with pytest.raises(ValueError, match="metadata key 'bad' holds a set"):
        store.add_texts(["a"], [{"bad": {1}}])


def test_retriever_and_relevance_scores_work(store: NumpyVectorStore) -> None:
    retriever = store.as_retriever(search_kwargs={"k": 1})
    assert isinstance(retriever, VectorStoreRetriever)
    assert retriever.invoke("blue sea")[0].id == "b"
    scored = store.similarity_search_with_relevance_scores("blue sea", k=3)
    assert all(0.0 <= s <= 1.0 for _, s in scored)
    assert scored[0][0].id == "b"


def test_async_methods_work_through_the_base_class(store: NumpyVectorStore) -> None:
    async def run() -> list[Document]:
        await store.aadd_texts(["async added text"], ids=["a1"])
        return await store.asimilarity_search("async added", k=1)

    assert asyncio.run(run())[0].id == "a1"


def test_save_and_load_memory_maps_and_searches_the_same(
    store: NumpyVectorStore, tmp_path: Path
) -> None:
    store.save(tmp_path)
    loaded = NumpyVectorStore.load(tmp_path, EMBEDDER)
    assert isinstance(loaded.vectors, np.memmap)
    assert loaded.similarity_search_with_score("apples", k=3) == store.similarity_search_with_score(
        "apples", k=3
    )
    loaded.add_texts(["writes after load copy the vectors into memory"], ids=["w"])
    assert not isinstance(loaded.vectors, np.memmap) and len(loaded) == 4


def test_load_names_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(IndexStoreError, match=r"chunks\.jsonl is missing"):
        NumpyVectorStore.load(tmp_path, EMBEDDER)


def test_from_vectors_normalises_given_vectors() -> None:
    store = NumpyVectorStore.from_vectors(["a", "b"], [[3.0, 4.0], [0.0, 2.0]], EMBEDDER)
    assert np.allclose(store.vectors, [[0.6, 0.8], [0.0, 1.0]])
    assert store.similarity_search_by_vector([0.0, 1.0], k=1)[0].page_content == "b"
