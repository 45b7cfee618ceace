"""Every tier runs the public contract of ``ragtiller.testing``, as a tier author would run it.

Real engines: ragtiller's numpy and bm25s tiers, Pinecone (dense and sparse) through its SDK
against the loopback emulator, LangChain's ``InMemoryVectorStore``, Chroma (embedded,
persistent, in ``tmp_path``) through ``langchain-chroma`` in each of its distances, and
``BM25Retriever`` (rank_bm25) from ``langchain-community``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from fixtures.pinecone_emulator import API_KEY, PineconeEmulator
from langchain_chroma import Chroma
from langchain_community.retrievers import BM25Retriever
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import InMemoryVectorStore
from langchain_pinecone import PineconeVectorStore
from pinecone import Pinecone

from ragtiller.adapters import RetrieverTier, VectorStoreTier
from ragtiller.core.tiers import Tier
from ragtiller.index import DenseTier, NumpyVectorStore
from ragtiller.index.lexical import LexicalTier
from ragtiller.index.records import RecordTable
from ragtiller.pinecone import PineconeLexicalTier, PineconeTier, upsert_chunks, upsert_lexical
from ragtiller.testing import TierContract, TierFactory


class TestNumpyDenseTier(TierContract):
    @pytest.fixture
    def make_tier(self, contract_embedder: Embeddings) -> TierFactory:
        def make(docs: Sequence[Document]) -> Tier:
            store = NumpyVectorStore(contract_embedder)
            store.add_texts(
                [d.page_content for d in docs],
                [dict(d.metadata) for d in docs],
                ids=[str(d.id) for d in docs],
            )
            return DenseTier(store)

        return make


class TestBm25sLexicalTier(TierContract):
    @pytest.fixture
    def make_tier(self) -> TierFactory:
        def make(docs: Sequence[Document]) -> Tier:
            texts = [d.page_content for d in docs]
            records = RecordTable(
                [str(d.id) for d in docs], texts, [dict(d.metadata) for d in docs]
            )
            return LexicalTier.build(records, texts)

        return make


class TestPineconeDenseTier(TierContract):
    @pytest.fixture
    def make_tier(self, contract_embedder: Embeddings) -> Iterator[TierFactory]:
        with (
            PineconeEmulator(dimension=64) as emulator,
            Pinecone(api_key=API_KEY).Index(host=emulator.host) as index,
        ):

            def make(docs: Sequence[Document]) -> Tier:
                store = PineconeVectorStore(index=index, embedding=contract_embedder)
                upsert_chunks(store, docs, embedder=contract_embedder)
                return PineconeTier(store)

            yield make


class TestPineconeLexicalTier(TierContract):
    @pytest.fixture
    def make_tier(self) -> Iterator[TierFactory]:
        with (
            PineconeEmulator(dimension=None) as emulator,
            Pinecone(api_key=API_KEY).Index(host=emulator.host) as index,
        ):

            def make(docs: Sequence[Document]) -> Tier:
                upsert_lexical(index, docs)
                return PineconeLexicalTier(index)

            yield make


class TestInMemoryVectorStore(TierContract):
    @pytest.fixture
    def make_tier(self, contract_embedder: Embeddings) -> TierFactory:
        def make(docs: Sequence[Document]) -> Tier:
            store = InMemoryVectorStore(contract_embedder)
            store.add_documents(list(docs))
            return VectorStoreTier(store, name="memory")

        return make


@pytest.mark.parametrize("space", ["l2", "cosine", "ip"])
class TestChroma(TierContract):
    @pytest.fixture
    def make_tier(self, contract_embedder: Embeddings, tmp_path: Path, space: str) -> TierFactory:
        def make(docs: Sequence[Document]) -> Tier:
            store = Chroma(
                collection_name="contract",
                embedding_function=contract_embedder,
                persist_directory=str(tmp_path / "chroma"),
                collection_configuration={"hnsw": {"space": space}},
            )
            store.add_documents(list(docs), ids=[str(d.id) for d in docs])
            return VectorStoreTier(store, name="chroma")

        return make


class TestBM25Retriever(TierContract):
    @pytest.fixture
    def make_tier(self) -> TierFactory:
        def make(docs: Sequence[Document]) -> Tier:
            return RetrieverTier(BM25Retriever.from_documents(docs), name="bm25")

        return make
