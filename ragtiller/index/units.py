"""What the index is made of: documents, their heading sections, and how sections were cut.

Ingest (:mod:`ragtiller.ingest`) produces these; the store keeps them and records the chunking
in its manifest, so they live here, below both.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ragtiller.core.filters import DEFAULT_NAMESPACE, namespace_of

TextFormat = Literal["markdown", "rst", "text"]
ChunkHeader = Literal["title", "path"]
"""What a chunk is indexed under before its text: ``title``, its document's title (BEIR's
``title + " " + text``); ``path`` (the default), that title and the headings above the chunk,
which for a document without headings (a BEIR record) is its title alone."""
ChunkWindow = Literal["embedder", "words"]
"""What else bounds a chunk besides ``chunk_tokens`` words (see ``ChunkingConfig.window``)."""


MAX_TOKEN_CHARS = 100
"""A token longer than this is cut into pieces of this many characters, each counted as a token
(BERT's basic tokenizer gives up on words past 100 characters too), so a base64 blob or a line of
minified code cannot make one chunk of megabytes."""


@dataclass(frozen=True)
class SourceDocument:
    """One document ready for chunking.

    Attributes:
        doc_id: The BEIR ``_id``, the path relative to the ingest root, or the ``Document``'s
            ``id``/``source`` metadata (a content hash when it has neither).
        text: The full text.
        source: Where it came from (a file path, ``corpus.jsonl#<_id>``, a URL).
        title: A title to put before each chunk's indexed text (BEIR title), if any; chunking
            reads a Markdown or reStructuredText document's only top-level heading as its title
            when it has none.
        format: How headings are found when splitting into sections.
        namespace: The namespace its chunks belong to.
        metadata: Other metadata to carry onto every chunk (``status`` and the like).
    """

    doc_id: str
    text: str
    source: str
    title: str | None = None
    format: TextFormat = "text"
    namespace: str = DEFAULT_NAMESPACE
    metadata: Mapping[str, Any] = field(default_factory=dict)


class ChunkingConfig(BaseModel):
    """How parent sections are cut into child chunks.

    Tokens are whitespace-separated words, so the bounds do not depend on any model's tokenizer;
    a word longer than :data:`MAX_TOKEN_CHARS` counts as one token per 100 characters. A chunk
    holds at most ``chunk_tokens`` tokens and at most ``chunk_tokens * MAX_TOKEN_CHARS``
    characters (whitespace included), whatever the input.

    Example:
        >>> ChunkingConfig(chunk_tokens=120, overlap_tokens=20).chunk_tokens
        120
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    chunk_tokens: int = Field(200, gt=0, description="Most words in one child chunk.")
    overlap_tokens: int = Field(
        40, ge=0, description="Words shared by consecutive children of one section."
    )
    header: ChunkHeader = Field(
        "path",
        description="The context header of each chunk's indexed (embedded and BM25) text: "
        "'title', the document title; 'path', the title and the chunk's heading path. "
        "The chunk's returned text is the chunk alone.",
    )
    window: ChunkWindow = Field(
        "words",
        description="What else bounds a chunk: 'words', the word bound alone (the embedder "
        "truncates a longer indexed text); 'embedder', its indexed text (header and chunk) "
        "also fits the embedder's input window, counted by the embedder's own tokenizer, where "
        "the embedder exposes one (ragtiller's MiniLM: 256 wordpieces).",
    )

    @model_validator(mode="after")
    def _overlap_below_size(self) -> ChunkingConfig:
        if self.overlap_tokens >= self.chunk_tokens:
            raise ValueError(
                f"overlap_tokens must be < chunk_tokens, but got overlap_tokens="
                f"{self.overlap_tokens} and chunk_tokens={self.chunk_tokens}"
            )
        return self


DEFAULT_CHUNKING = ChunkingConfig()

SENTENCE_END = re.compile(r"[.!?][\"'\u201d\u2019)\]]*$")
"""A word that ends a sentence: ``.``, ``!`` or ``?``, then any closing quotes or brackets."""
_BLANK_LINE = re.compile(r"\n[ \t]*\n")
_WORD = re.compile(r"\S+")


def wrap_width(text: str) -> int | None:
    """How ``text`` marks its paragraphs, for :func:`paragraph_break`: None, by blank lines; 0,
    one paragraph per line; else hard-wrapped at this width (its longest line)."""
    if _BLANK_LINE.search(text):
        return None
    lines = [line.rstrip() for line in text.split("\n")]
    width = max(len(line) for line in lines)
    longest = next(i for i, line in enumerate(lines) if len(line) == width)
    votes = [  # the longest line is full by definition: it does not vote
        _full(len(line), following, 0, width)
        for i, (line, following) in enumerate(itertools.pairwise(lines))
        if i != longest
    ]
    return width if 2 * sum(votes) > len(votes) else 0


def _full(line: int, text: str, start: int, width: int) -> bool:
    """Whether a line of ``line`` characters was full: the first word of ``text[start:]`` (the
    next line's) would not have fitted after it within ``width``."""
    word = _WORD.search(text, start)
    return line + 1 + (len(word.group()) if word else 0) > width


def paragraph_break(text: str, end: int, start: int, *, width: int | None) -> bool:
    """Whether a paragraph of ``text`` ends at ``end`` (a word's end) and the next begins at
    ``start`` (the next word's start); ``width`` is ``wrap_width(text)``.

    Paragraphs are separated by blank lines. A text without any breaks its lines either to
    end paragraphs (one per line, as many exports write it) or to wrap them; it is wrapped
    when most of its lines besides the longest are full, the next line's first word too long
    to fit within the longest line's length (a greedy wrapper leaves every line so). In one
    paragraph per line every line end is a break; in wrapped text, the end of a line that was
    not full (a paragraph's short last line). Chunking and the paragraph units read paragraphs
    through this one rule.

    Example:
        >>> text = "A first paragraph on its line.\\nThen a second, longer, on its own line."
        >>> paragraph_break(text, 30, 31, width=wrap_width(text))
        True
    """
    if width is None:
        return _BLANK_LINE.search(text, end, start) is not None
    if text.find("\n", end, start) < 0:
        return False
    if width == 0:
        return True
    return not _full(end - (text.rfind("\n", 0, end) + 1), text, start, width)


@dataclass(frozen=True)
class Section:
    """A parent: one heading's text (heading line included), or a whole heading-less document.

    Attributes:
        id: Stable id (hash of namespace, document id, section path and text).
        document: The document it comes from.
        path: Heading titles from the outermost down; empty before the first heading.
        text: The section text, stripped of surrounding whitespace.
        start: Offset of ``text`` in the document text, in characters.
        end: End offset (exclusive) in the document text, in characters.
        body_start: Offset in ``text`` where the body after the heading begins.
    """

    id: str
    document: SourceDocument
    path: tuple[str, ...]
    text: str
    start: int
    end: int
    body_start: int


_RESERVED_SECTION_KEYS = frozenset(
    {"doc_id", "source", "namespace", "title", "section_path", "start", "end"}
)


def section_from_record(id_: str, text: str, md: dict[str, Any]) -> Section:
    """A stored section as a :class:`Section`, for the corpus map and the parents table.

    The document text is not stored, so ``document.text`` is empty; where the body begins is
    recovered as the line after the heading (and after an underline, for setext and rST).
    """
    document = SourceDocument(
        doc_id=str(md.get("doc_id")),
        text="",
        source=str(md.get("source", "")),
        title=md.get("title"),
        namespace=namespace_of(md),
        metadata={k: v for k, v in md.items() if k not in _RESERVED_SECTION_KEYS},
    )
    path = tuple(md.get("section_path") or ())
    return Section(
        id_, document, path, text, int(md.get("start", 0)), int(md.get("end", 0)), _body(text, path)
    )


def _body(text: str, path: tuple[str, ...]) -> int:
    if not path:
        return 0
    lines = text.splitlines(keepends=True)
    skip = 1
    if len(lines) > 1 and lines[1].strip() and len(set(lines[1].strip())) == 1:
        skip = 2
    return sum(len(line) for line in lines[:skip])
