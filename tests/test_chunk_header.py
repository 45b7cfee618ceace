"""``chunking.header: path``: each chunk is indexed under its title and heading path.

A paragraph deep in a long article rarely names the article or its section; with the header,
a query that does can still match it. The header is for matching only: the returned text is
the chunk alone, and every backend that indexes a chunk (embedded BM25, the embedded vectors,
Pinecone's sparse and dense upserts, RM3) reads the same ``indexed_text``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fixtures.pinecone_emulator import API_KEY, PineconeEmulator
from langchain_core.documents import Document
from pinecone import Pinecone

from ragtiller.core.tiers import SearchRequest
from ragtiller.errors import IngestError
from ragtiller.index import ChunkingConfig, EmbeddedIndex
from ragtiller.index.lexical import HEADER_KEY, indexed_text
from ragtiller.ingest import build_index
from ragtiller.models import HashingEmbedder
from ragtiller.pinecone import PineconeLexicalTier, upsert_lexical

EMBEDDER = HashingEmbedder(dim=64)
FIRST = "They run in herds across the open grassland and graze for most of the day."
ZEBRA = (
    f"# Zebras\n\n## Stripes\n\n{FIRST}\n\nEach animal has a unique pattern of bands on its coat."
)
HORSE = f"# Horses\n\n## Hooves\n\n{FIRST}\n\nA farrier trims the hoof and fits a shoe."


def docs() -> list[Document]:
    return [
        Document(page_content=ZEBRA, metadata={"source": "zebra.md"}),
        Document(page_content=HORSE, metadata={"source": "horse.md"}),
    ]


def build(header: str) -> EmbeddedIndex:
    chunking = ChunkingConfig(chunk_tokens=40, overlap_tokens=5, header=header)
    return build_index(docs(), embedder=EMBEDDER, chunking=chunking, progress=False)


def lexical(index: EmbeddedIndex, query: str) -> list[Any]:
    tier = next(t for t in index.tiers if t.name == "lexical")
    return tier.search(SearchRequest(query=query, vector=None, k=5))


@pytest.fixture(scope="module")
def with_path() -> EmbeddedIndex:
    return build("path")


def test_the_header_is_the_title_and_heading_path_and_the_text_stays_the_chunk(
    with_path: EmbeddedIndex,
) -> None:
    records = with_path.store.records
    row = next(r for r, t in enumerate(records.texts) if "unique pattern" in t)
    assert records.metadatas[row][HEADER_KEY] == "Zebras / Stripes"
    assert records.texts[row] == "Each animal has a unique pattern of bands on its coat."
    assert indexed_text(records.texts[row], records.metadatas[row]) == (
        "Zebras / Stripes Each animal has a unique pattern of bands on its coat."
    )
    assert with_path.manifest.chunking.header == "path"


def test_a_query_naming_the_section_finds_its_paragraph_only_with_the_header(
    with_path: EmbeddedIndex,
) -> None:
    found = [h["text"] for h in lexical(with_path, "stripes")]
    assert any(t.startswith("Each animal has a unique pattern") for t in found)
    assert not [h for h in lexical(build("title"), "stripes") if "unique" in h["text"]]


def test_the_default_header_is_the_path_and_the_h1_is_the_title() -> None:
    chunking = ChunkingConfig(chunk_tokens=40, overlap_tokens=5)
    index = build_index(docs(), embedder=EMBEDDER, chunking=chunking, progress=False)
    records = index.store.records
    row = next(r for r, t in enumerate(records.texts) if "unique pattern" in t)
    assert index.manifest.chunking.header == "path"
    assert records.metadatas[row]["title"] == "Zebras"
    assert records.metadatas[row][HEADER_KEY] == "Zebras / Stripes"


def test_the_title_header_indexes_what_it_did_before() -> None:
    index = build("title")
    records = index.store.records
    assert all(HEADER_KEY not in md for md in records.metadatas)
    assert indexed_text("text", {"title": "T"}) == "T text"
    assert indexed_text("text", {}) == "text"


def test_the_dense_vectors_embed_the_header(with_path: EmbeddedIndex) -> None:
    records = with_path.store.records
    row = next(r for r, t in enumerate(records.texts) if "unique pattern" in t)
    expected = EMBEDDER.embed_documents([indexed_text(records.texts[row], records.metadatas[row])])
    plain = EMBEDDER.embed_documents([records.texts[row]])
    stored = with_path.store.vectors[row].tolist()
    assert stored == pytest.approx(expected[0], abs=1e-6)
    assert stored != pytest.approx(plain[0], abs=1e-6)


def test_changing_the_header_needs_a_full_rebuild(with_path: EmbeddedIndex) -> None:
    with pytest.raises(IngestError, match="chunked with"):
        build_index(
            docs(),
            embedder=EMBEDDER,
            chunking=ChunkingConfig(chunk_tokens=40, overlap_tokens=5, header="title"),
            previous=with_path,
            progress=False,
        )


@pytest.fixture
def remote() -> Iterator[Any]:
    with (
        PineconeEmulator(dimension=None) as server,
        Pinecone(api_key=API_KEY).Index(host=server.host) as handle,
    ):
        yield handle


def test_pinecone_sparse_indexes_the_same_text_as_the_embedded_tier(
    with_path: EmbeddedIndex, remote: Any
) -> None:
    upsert_lexical(remote, with_path)
    request = SearchRequest(query="zebra stripes", vector=None, k=5)
    remote_hits = PineconeLexicalTier(remote).search(request)
    local_hits = lexical(with_path, "zebra stripes")
    assert [h["id"] for h in remote_hits] == [h["id"] for h in local_hits]
    for got, want in zip(remote_hits, local_hits, strict=True):
        assert got["score"] == pytest.approx(want["score"], rel=1e-5)
        assert got["text"] == want["text"]  # the chunk, not the header
