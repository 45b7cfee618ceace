"""Documents, their heading sections and how they were cut: made by ingest, kept by the index."""

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
ChunkWindow = Literal["embedder", "words"]
# a longer token counts once per this many characters (BERT's tokenizer gives up past 100 too),
# so a base64 blob or a line of minified code cannot make one chunk of megabytes
MAX_TOKEN_CHARS = 100


@dataclass(frozen=True)
class SourceDocument:
    """One document ready for chunking (``doc_id``: a BEIR ``_id``, a path under the ingest root or
    a ``Document``'s id); ``metadata`` is carried onto every chunk."""

    doc_id: str
    text: str
    source: str
    title: str | None = None
    format: TextFormat = "text"
    namespace: str = DEFAULT_NAMESPACE
    metadata: Mapping[str, Any] = field(default_factory=dict)


class ChunkingConfig(BaseModel):
    """How parent sections are cut into child chunks, in whitespace-separated words (so the
    bounds do not depend on a model's tokenizer)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    chunk_tokens: int = Field(200, gt=0)  # most words in one child chunk
    overlap_tokens: int = Field(40, ge=0)  # words consecutive children of a section share
    # before each chunk's embedded and BM25 text: the document title, or it and the heading path
    header: ChunkHeader = "path"
    # 'words': the word bound alone (the embedder truncates a longer text); 'embedder': the
    # indexed text also fits the embedder's window, by its own tokenizer where it has one
    window: ChunkWindow = "words"

    @model_validator(mode="after")
    def _overlap_below_size(self) -> ChunkingConfig:
        if self.overlap_tokens >= self.chunk_tokens:
            raise ValueError(
                f"overlap_tokens must be < chunk_tokens, but got overlap_tokens="
                f"{self.overlap_tokens} and chunk_tokens={self.chunk_tokens}"
            )
        return self


DEFAULT_CHUNKING = ChunkingConfig()

SENTENCE_END = re.compile(r"[.!?][\"'\u201d\u2019)\]]*$")  # then closing quotes or brackets
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
    """Whether a line of ``line`` characters was full: the next word would not fit after it."""
    word = _WORD.search(text, start)
    return line + 1 + (len(word.group()) if word else 0) > width


def paragraph_break(text: str, end: int, start: int, *, width: int | None) -> bool:
    """Whether a paragraph ends between the word ending at ``end`` and the next, at ``start``:
    without blank lines, at each line, or in wrapped text (most lines full) at one not full.

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
    """A parent: one heading's text (heading line included), or a whole heading-less document."""

    id: str
    document: SourceDocument
    path: tuple[str, ...]
    text: str
    start: int
    end: int
    body_start: int


_RESERVED_SECTION_KEYS = {"doc_id", "source", "namespace", "title", "section_path", "start", "end"}


def section_from_record(id_: str, text: str, md: dict[str, Any]) -> Section:
    """A stored section as a :class:`Section`, its document's text empty (it is not stored)."""
    document = SourceDocument(
        doc_id=str(md.get("doc_id")),
        text="",
        source=str(md.get("source", "")),
        title=md.get("title"),
        namespace=namespace_of(md),
        metadata={k: v for k, v in md.items() if k not in _RESERVED_SECTION_KEYS},
    )
    path = tuple(md.get("section_path") or ())
    body = 0
    if path:  # the body begins after the heading line (and an underline, for setext and rST)
        lines = text.splitlines(keepends=True)
        underlined = len(lines) > 1 and lines[1].strip() and len(set(lines[1].strip())) == 1
        body = sum(len(line) for line in lines[: 2 if underlined else 1])
    return Section(id_, document, path, text, int(md.get("start", 0)), int(md.get("end", 0)), body)
