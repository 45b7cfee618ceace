"""Chunking invariants: parents by heading, token-bounded children, offsets, overlap, stable ids."""

from __future__ import annotations

import itertools
import random
import re
import textwrap

import pytest
from pydantic import ValidationError

from ragtiller.index import ChunkingConfig, SourceDocument
from ragtiller.index.units import TextFormat
from ragtiller.ingest import chunk_documents
from ragtiller.ingest.chunking import passage_windows, token_windows
from ragtiller.ingest.headings import SectionSpan, find_headings, section_spans


def split_sections(text: str, fmt: TextFormat) -> list[SectionSpan]:
    return section_spans(text, find_headings(text, fmt))


MARKDOWN = """Intro line before any heading.

# Install

Run pip install ragtiller. It needs Python 3.11.

```python
# not a heading inside a fence
print("hi")
```

## From source

Clone the repository and run make.

## Empty

### Deeper

Only this sub-section has text.

# Usage

Call ask() with a question.
"""

RST = """=====
Guide
=====

Welcome to the guide.

Install
-------

Use pip.

Reference
---------

The API.

Details
~~~~~~~

Rows of text.

Appendix
--------

Last words.
"""


def words(n: int, prefix: str = "w") -> str:
    return " ".join(f"{prefix}{i}" for i in range(n))


def doc(text: str, fmt: str = "markdown", doc_id: str = "a.md") -> SourceDocument:
    return SourceDocument(doc_id, text, doc_id, format=fmt)  # type: ignore[arg-type]


def test_markdown_sections_follow_headings_and_ignore_fences() -> None:
    paths = [path for path, *_ in split_sections(MARKDOWN, "markdown")]
    assert paths == [
        (),
        ("Install",),
        ("Install", "From source"),
        ("Install", "Empty", "Deeper"),
        ("Usage",),
    ]


def test_section_text_starts_at_its_heading_and_body_start_skips_it() -> None:
    sections, _ = chunk_documents([doc(MARKDOWN)], ChunkingConfig())
    install = next(s for s in sections if s.path == ("Install",))
    assert install.text.startswith("# Install")
    assert install.text == MARKDOWN[install.start : install.end]
    assert install.text[install.body_start :].strip().startswith("Run pip install")
    assert "# not a heading" in install.text


def test_rst_sections_nest_by_the_order_adornment_styles_first_appear() -> None:
    paths = [path for path, *_ in split_sections(RST, "rst")]
    assert paths == [
        ("Guide",),
        ("Guide", "Install"),
        ("Guide", "Reference"),
        ("Guide", "Reference", "Details"),
        ("Guide", "Appendix"),
    ]


def test_rst_adornment_shorter_than_title_is_not_a_heading() -> None:
    text = "A long title line\n===\n\nbody\n"
    assert [p for p, *_ in split_sections(text, "rst")] == [()]


@pytest.mark.parametrize("fmt", ["text", "markdown", "rst"])
def test_heading_less_text_is_one_section(fmt: str) -> None:
    text = "  just words\nacross lines.  \n"
    end = len(text.rstrip())
    assert split_sections(text, fmt) == [((), 2, end, 0)]  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("n_words", "size", "overlap"), [(1, 5, 0), (5, 5, 2), (6, 5, 2), (23, 5, 2), (100, 7, 0)]
)
def test_windows_cover_every_word_and_overlap_exactly(
    n_words: int, size: int, overlap: int
) -> None:
    text = words(n_words)
    config = ChunkingConfig(chunk_tokens=size, overlap_tokens=overlap)
    windows = token_windows(text, config)
    chunk_words = [text[s:e].split() for s, e in windows]
    assert all(0 < len(w) <= size for w in chunk_words)
    covered = [w for ws in chunk_words for w in ws]
    assert set(covered) == set(text.split())
    for left, right in itertools.pairwise(chunk_words):
        shared = [w for w in left if w in right]
        assert shared == left[len(left) - overlap :] == right[:overlap]
    assert windows[0][0] == 0 and windows[-1][1] == len(text)


def test_every_child_has_its_parent_and_offsets_cover_the_parent() -> None:
    text = "# A\n\n" + words(450, "a") + "\n\n# B\n\n" + words(30, "b")
    config = ChunkingConfig(chunk_tokens=100, overlap_tokens=20)
    sections, chunks = chunk_documents([doc(text)], config)
    by_id = {s.id: s for s in sections}
    for section in sections:
        children = [c for c in chunks if c.section.id == section.id]
        assert children, f"section {section.path} has no children"
        covered = [False] * len(section.text)
        for child in children:
            assert child.text.strip() and child.text == section.text[child.start : child.end]
            assert by_id[child.section.id] is section
            covered[child.start : child.end] = [True] * (child.end - child.start)
        gaps = {section.text[i] for i, c in enumerate(covered) if not c}
        assert gaps <= {" ", "\n"}, "only whitespace may fall between children"
        assert len(children[0].text.split()) <= config.chunk_tokens
    assert len([c for c in chunks if c.section.path == ("A",)]) == 6  # 452 words, stride 80


def test_no_empty_chunks_or_sections_from_blank_and_heading_only_text() -> None:
    sections, chunks = chunk_documents(
        [doc("# Only\n\n## Headings\n"), doc("   \n\n", doc_id="blank.md")], ChunkingConfig()
    )
    assert sections == [] and chunks == []


def test_ids_are_stable_across_reingest_and_unique_for_repeats() -> None:
    repeated = "# Same\n\nsame text\n\n# Same\n\nsame text\n"
    first = chunk_documents([doc(MARKDOWN), doc(repeated, doc_id="r.md")], ChunkingConfig())
    second = chunk_documents([doc(MARKDOWN), doc(repeated, doc_id="r.md")], ChunkingConfig())
    ids = [c.id for c in first[1]] + [s.id for s in first[0]]
    assert ids == [c.id for c in second[1]] + [s.id for s in second[0]]
    assert len(set(ids)) == len(ids)
    assert all(re.fullmatch(r"[0-9a-f]{16}", i) for i in ids)


def test_ids_change_with_document_namespace_and_text() -> None:
    def first_id(d: SourceDocument) -> str:
        return chunk_documents([d], ChunkingConfig())[1][0].id

    base = first_id(doc("hello world"))
    assert first_id(doc("hello world", doc_id="b.md")) != base
    assert first_id(SourceDocument("a.md", "hello world", "a.md", namespace="api")) != base
    assert first_id(doc("hello world!")) != base


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"chunk_tokens": 0}, "greater than 0"),
        ({"overlap_tokens": -1}, "greater than or equal to 0"),
        ({"chunk_tokens": 10, "overlap_tokens": 10}, "overlap_tokens must be < chunk_tokens"),
        ({"chunk_size": 10}, "Extra inputs are not permitted"),
    ],
)
def test_chunking_config_rejects_bad_values(kwargs: dict[str, int], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        ChunkingConfig(**kwargs)


def test_chunking_config_is_frozen() -> None:
    config = ChunkingConfig()
    with pytest.raises(ValidationError):
        config.chunk_tokens = 5  # type: ignore[misc]
    assert (config.chunk_tokens, config.overlap_tokens) == (200, 40)


def test_markdown_setext_headings_split_sections() -> None:
    text = "Guide\n=====\n\nIntro words.\n\nInstall\n-------\n\nRun pip.\n\nA rule below a paragraph\n\n---\n\nEnd.\n"
    paths = [path for path, *_ in split_sections(text, "markdown")]
    assert paths == [("Guide",), ("Guide", "Install")]


def sentences(n: int, length: int, prefix: str) -> str:
    """``n`` sentences of ``length`` words each, every word unique."""
    return " ".join(" ".join(f"{prefix}{i}x{j}" for j in range(length)) + "." for i in range(n))


def chunk_texts(text: str, config: ChunkingConfig) -> list[str]:
    return [text[s:e] for s, e in passage_windows(text, config)]


def test_each_paragraph_is_a_chunk_and_a_heading_line_joins_the_first() -> None:
    p1, p2, p3 = sentences(3, 10, "a"), sentences(4, 10, "b"), sentences(5, 10, "c")
    text = f"# Title\n\n{p1}\n\n{p2}\n\n{p3}"
    assert chunk_texts(text, ChunkingConfig(chunk_tokens=100, overlap_tokens=20)) == [
        f"# Title\n\n{p1}",
        p2,
        p3,
    ]


def test_without_blank_lines_a_line_that_ends_a_sentence_ends_a_paragraph() -> None:
    # One paragraph per line, as many exports write: each line is a passage of its own.
    p1, p2, p3 = sentences(3, 10, "a"), sentences(4, 10, "b"), sentences(5, 10, "c")
    config = ChunkingConfig(chunk_tokens=100, overlap_tokens=20)
    assert chunk_texts(f"{p1}\n{p2}\n{p3}", config) == [p1, p2, p3]
    # Once the text has a blank line, blank lines alone separate paragraphs.
    assert chunk_texts(f"{p1}\n{p2}\n\n{p3}", config) == [f"{p1}\n{p2}", p3]


def test_without_blank_lines_a_line_that_is_not_full_ends_a_paragraph() -> None:
    # "[citation needed]" ends no sentence, but the next word would have fitted on its line.
    p1 = sentences(3, 10, "a") + " [citation needed]"
    p2, p3 = sentences(5, 10, "b"), sentences(4, 10, "c")
    config = ChunkingConfig(chunk_tokens=100, overlap_tokens=20)
    assert chunk_texts(f"{p1}\n{p2}\n{p3}", config) == [p1, p2, p3]
    wrapped = textwrap.fill(p1, 30) + "\n" + textwrap.fill(p3, 30)  # hard-wrapped, no blank line
    assert [" ".join(c.split()) for c in chunk_texts(wrapped, config)] == [p1, p3]


def test_hard_wrapped_lines_inside_a_sentence_do_not_end_a_paragraph() -> None:
    text = sentences(6, 10, "w")
    wrapped = re.sub(r"(\S+ \S+ \S+ \S+ \S+ \S+ \S+) ", "\\1\n", text)  # 7 words a line
    assert "\n" in wrapped and not wrapped.split("\n")[0].endswith(".")
    config = ChunkingConfig(chunk_tokens=100, overlap_tokens=20)
    assert chunk_texts(wrapped, config) == [wrapped]


def test_an_overlong_paragraph_is_cut_at_sentence_ends_and_pieces_share_a_sentence() -> None:
    text = sentences(10, 7, "s")  # 70 words, no blank line
    config = ChunkingConfig(chunk_tokens=20, overlap_tokens=8)
    pieces = [p.split() for p in chunk_texts(text, config)]
    assert all(len(p) <= 20 and p[-1].endswith(".") for p in pieces)
    for left, right in itertools.pairwise(pieces):
        assert right[:7] == left[-7:] and right[7] not in left  # one whole sentence repeated
    assert {w for p in pieces for w in p} == set(text.split())


def test_a_sentence_longer_than_a_chunk_is_cut_into_word_windows() -> None:
    text = words(50) + "."
    config = ChunkingConfig(chunk_tokens=20, overlap_tokens=5)
    assert passage_windows(text, config) == token_windows(text, config)


def test_a_short_last_paragraph_joins_the_one_before_when_both_fit() -> None:
    body, tail = sentences(3, 10, "a"), "See also."
    text = f"{body}\n\n{tail}"
    assert chunk_texts(text, ChunkingConfig(chunk_tokens=40, overlap_tokens=5)) == [text]
    assert chunk_texts(text, ChunkingConfig(chunk_tokens=31, overlap_tokens=5)) == [body, tail]


@pytest.mark.parametrize("seed", range(20))
def test_passages_cover_every_word_within_the_bound_and_never_span_two_paragraphs(
    seed: int,
) -> None:
    rng = random.Random(seed)
    paragraphs = [
        sentences(rng.randint(1, 12), rng.randint(1, 30), f"p{i}s")
        for i in range(rng.randint(1, 8))
    ]
    text = "\n\n".join(paragraphs)
    config = ChunkingConfig(chunk_tokens=rng.randint(8, 60), overlap_tokens=rng.randint(0, 7))
    small = config.chunk_tokens // 4
    pieces = chunk_texts(text, config)
    assert all(0 < len(p.split()) <= config.chunk_tokens for p in pieces)
    assert {w for p in pieces for w in p.split()} == set(text.split())
    for piece in pieces:  # a piece spans two paragraphs only when one of them is a fragment
        parts = piece.split("\n\n")
        assert len(parts) == 1 or any(len(part.split()) < small for part in parts)
