"""The corpus map: a bounded outline of documents and sections with one-line summaries."""

from __future__ import annotations

import pytest
from langchain_core.documents import Document

from ragtiller.index import ChunkingConfig, build_corpus_map
from ragtiller.index.corpus_map import summarize
from ragtiller.index.units import Section
from ragtiller.ingest import build_index
from ragtiller.ingest.chunking import chunk_documents
from ragtiller.ingest.sources import load_sources
from ragtiller.models import HashingEmbedder


def sections_of(docs: list[Document]) -> list[Section]:
    return chunk_documents(load_sources(docs)[0], ChunkingConfig())[0]


def test_outline_lists_documents_sections_and_first_sentences() -> None:
    docs = [
        Document(
            page_content=(
                "# Guide\n\nRagtiller retrieves with a **graph**. It has tiers.\n\n"
                "## Install\n\nRun `pip install ragtiller`. Then ingest."
            ),
            metadata={"source": "guide.md"},
        ),
        Document(page_content="Plain notes. More notes.", metadata={"source": "notes.txt"}),
        Document(page_content="Cats purr.", metadata={"id": "d1", "title": "Cats"}),
    ]
    index = build_index(docs, embedder=HashingEmbedder(dim=16), progress=False)
    assert index.corpus_map == (
        "Corpus: 3 documents, 4 sections.\n"
        "- Guide\n"
        "  - Guide: Ragtiller retrieves with a graph.\n"
        "  - Guide > Install: Run pip install ragtiller.\n"
        "- notes.txt: Plain notes.\n"
        "- Cats: Cats purr."
    )


def test_long_sentences_are_trimmed_at_a_word_boundary() -> None:
    summary = summarize("word " * 100 + "end.")
    assert len(summary) <= 120 and summary.endswith("word…")
    assert summarize("Short. Second.") == "Short."
    assert summarize("no full stop here") == "no full stop here"


def test_documents_and_sections_are_bounded() -> None:
    many = [
        Document(page_content=f"Doc {i} text.", metadata={"source": f"d{i}.txt"})
        for i in range(100)
    ]
    text = build_corpus_map(sections_of(many), max_documents=60)
    assert text.splitlines()[0] == "Corpus: 100 documents, 100 sections."
    assert text.splitlines()[-1] == "... and 40 more documents"
    assert len(text.splitlines()) == 62

    wide = "\n\n".join(f"# H{i}\n\nBody {i}." for i in range(12))
    text = build_corpus_map(sections_of([Document(page_content=wide, metadata={"source": "w.md"})]))
    assert "  - H7: Body 7." in text and "H8:" not in text
    assert text.endswith("  - ... and 4 more sections")


@pytest.mark.parametrize("max_chars", [300, 1000, 4000])
def test_total_size_is_bounded(max_chars: int) -> None:
    docs = [
        Document(
            page_content=f"A fairly long sentence number {i} about things.",
            metadata={"source": f"doc-{i}.txt"},
        )
        for i in range(500)
    ]
    text = build_corpus_map(sections_of(docs), max_documents=1000, max_chars=max_chars)
    assert len(text) <= max_chars
    assert text.splitlines()[-1].startswith("... and ")


def test_empty_corpus_gives_an_empty_map() -> None:
    assert build_corpus_map([]) == ""
