"""Markdown keeps its headings, tables stay whole, titles are not doubled, citations are stable.

Regression tests for issue 44 (items 2, 6, 7 and 9) over tests/data/quayside, product docs for
a fictional job queue written the way such docs are: H1 titles, H2 sections, code blocks, a
settings table longer than a chunk and an FAQ. On e4bb0c1 every chunk had ``title: None``,
the table was cut mid-row, a title-only BEIR record was indexed as "title title" and a file's
citation was its path as typed.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from langchain_core.documents import Document

from ragtiller import build_graph
from ragtiller.index import EmbeddedIndex
from ragtiller.index.lexical import HEADER_KEY, indexed_text
from ragtiller.index.units import DEFAULT_CHUNKING
from ragtiller.ingest import build_index, load_sources
from ragtiller.models import HashingEmbedder

DOCS = Path(__file__).parent / "data" / "quayside"
EMBEDDER = HashingEmbedder(dim=256)


@pytest.fixture(scope="module")
def index() -> EmbeddedIndex:
    return build_index([DOCS], embedder=EMBEDDER, progress=False)


def chunk_rows(index: EmbeddedIndex, source: str) -> list[int]:
    return [r for r, md in enumerate(index.store.records.metadatas) if md["source"] == source]


def test_the_h1_is_the_title_and_a_later_paragraph_is_indexed_under_its_heading_path(
    index: EmbeddedIndex,
) -> None:
    records = index.store.records
    row = next(r for r, t in enumerate(records.texts) if t.startswith("The default is 30 seconds"))
    md = records.metadatas[row]
    assert (md["title"], md["section_path"]) == ("Jobs", ["Jobs", "Visibility timeout"])
    assert md[HEADER_KEY] == "Jobs / Visibility timeout"
    assert indexed_text(records.texts[row], md).startswith("Jobs / Visibility timeout The default")
    first = next(r for r, t in enumerate(records.texts) if t.startswith("## Visibility timeout"))
    assert records.metadatas[first].get(HEADER_KEY) is None  # its text holds the heading: title
    assert indexed_text(records.texts[first], records.metadatas[first]).startswith("Jobs ## Vis")
    assert {records.metadatas[r]["title"] for r in chunk_rows(index, "faq.md")} == {
        "Frequently asked questions"
    }


def test_an_rst_document_s_only_top_level_title_is_its_title_and_two_h1s_are_no_title() -> None:
    rst = "Broker\n======\n\nIt holds every queue.\n\nPorts\n-----\n\nIt listens on 7420.\n"
    two = "# Install\n\nRun pip.\n\n# Upgrade\n\nRun pip again.\n"
    built = build_index(
        [
            Document(page_content=rst, metadata={"source": "broker.rst"}),
            Document(page_content=two, metadata={"source": "notes.md"}),
        ],
        embedder=EMBEDDER,
        progress=False,
    )
    titles = {md["source"]: md["title"] for md in built.store.records.metadatas}
    assert titles == {"broker.rst": "Broker", "notes.md": None}


# (question, words of the passage that answers it): the first was not returned on e4bb0c1 (the
# headings were not read); the others came first there too, and must stay first.
FIRST = [
    ("How do I pause a queue with the command line?", "Inspects and configures queues"),
    ("How do I get started?", "This guide takes you from an empty machine"),
    ("What is the default retry policy?", "The default is five attempts"),
    ("Where do dead jobs go?", "A job that fails its last attempt moves"),
]
# Returned in the top 5, and not returned at all on e4bb0c1.
RETURNED = [
    ("How does a worker acknowledge a job?", "A worker acknowledges a job by returning"),
    ("What is the default of worker.concurrency?", "`worker.concurrency`"),
]


def answer_rank(index: EmbeddedIndex, question: str, words: str) -> int | None:
    out = build_graph(None, index=index).invoke({"query": question}, context={"top_k": 5})
    texts = [d.page_content for d in out["documents"]]
    return next((i for i, text in enumerate(texts, start=1) if words in text), None)


@pytest.mark.parametrize(("question", "words"), FIRST)
def test_the_answering_passage_comes_first(index: EmbeddedIndex, question: str, words: str) -> None:
    assert answer_rank(index, question, words) == 1


@pytest.mark.parametrize(("question", "words"), RETURNED)
def test_the_answering_passage_is_returned(index: EmbeddedIndex, question: str, words: str) -> None:
    assert answer_rank(index, question, words) is not None


def test_a_long_table_is_cut_between_rows_and_each_piece_repeats_the_header(
    index: EmbeddedIndex,
) -> None:
    records = index.store.records
    table = (DOCS / "configuration.md").read_text().split("\n\n")[4]
    head, rows = table.split("\n")[:2], table.split("\n")[2:]
    pieces = [
        records.texts[r] for r in chunk_rows(index, "configuration.md") if "| `" in records.texts[r]
    ]
    assert len(pieces) > 1  # the table is longer than one chunk
    assert not pieces[0].startswith("| Setting")  # the first piece leads in with the section
    for piece in pieces:
        assert len(piece.split()) <= DEFAULT_CHUNKING.chunk_tokens
        lines = piece[piece.index("| Setting") :].split("\n")
        assert lines[:2] == head
        assert set(lines[2:]) <= set(rows)  # whole rows only
    assert {line for piece in pieces[1:] for line in piece.split("\n")[2:]} | set(
        pieces[0].split("\n")
    ) >= set(rows)


def test_a_beir_record_without_text_is_indexed_as_its_title_once(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    lines = [
        {"_id": "1", "title": "Extraction of roots by repeated subtractions", "text": ""},
        {"_id": "2", "title": "Secant method", "text": "Secant method"},
        {"_id": "3", "title": "Sorting", "text": "Merge sort splits the list."},
    ]
    corpus.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    built = build_index([corpus], embedder=EMBEDDER, progress=False)
    records = built.store.records
    assert sorted(
        indexed_text(t, md) for t, md in zip(records.texts, records.metadatas, strict=True)
    ) == [
        "Extraction of roots by repeated subtractions",
        "Secant method",
        "Sorting Merge sort splits the list.",
    ]


def test_a_citation_is_the_path_from_the_folder_named_however_it_was_typed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = tmp_path / "harbordocs"
    (docs / "jobs").mkdir(parents=True)
    (docs / "jobs" / "visibility.md").write_text("# Visibility\n\nThirty seconds.\n")
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    typed = ["../harbordocs", "../harbordocs/", str(docs), os.path.relpath(docs) + "/./"]
    sources = {d.source for t in typed for d in load_sources([t])[0]}
    assert sources == {"jobs/visibility.md"}
    monkeypatch.chdir(tmp_path)
    built = build_index([Path("harbordocs")], embedder=EMBEDDER, progress=False)
    assert {md["source"] for md in built.store.records.metadatas} == {"jobs/visibility.md"}
    named = load_sources(["harbordocs/jobs/visibility.md"])[0]
    assert [(d.doc_id, d.source) for d in named] == [("visibility.md", "visibility.md")]


def test_every_passage_in_the_context_stands_under_its_heading_path(index: EmbeddedIndex) -> None:
    """Issue 44, item 6: a passage that is not its section's first chunk appeared in the context
    without its heading."""
    out = build_graph(index=index).invoke({"query": "What is the default visibility timeout?"})
    shown = [d for d in out["documents"] if d.metadata["in_context"]]
    later = [d for d in shown if d.metadata.get(HEADER_KEY)]
    assert later, "the question should reach passages indexed under a heading path"
    for d in later:
        line = f"[{d.metadata['citation']}] {d.metadata['source']} ({d.metadata[HEADER_KEY]})\n"
        assert line in out["context"]
