"""Hierarchical chunking: documents -> sections (by heading) -> passages that follow the
author's units (a paragraph; only one over ``chunk_tokens`` words is cut, at sentence ends or
between a pipe table's rows, each piece repeating the header row)."""

from __future__ import annotations

import bisect
import dataclasses
import hashlib
import itertools
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ragtiller.index.lexical import HEADER_KEY
from ragtiller.index.units import (
    MAX_TOKEN_CHARS,
    SENTENCE_END,
    ChunkHeader,
    ChunkingConfig,
    Section,
    SourceDocument,
    paragraph_break,
    wrap_width,
)
from ragtiller.ingest.headings import document_title, find_headings, section_spans

_TABLE_DELIMITER = re.compile(r"[ \t]*\|?([ \t]*:?-+:?[ \t]*\|)+([ \t]*:?-+:?[ \t]*)?\|?[ \t]*")
Span = tuple[int, int]  # characters [start, end), or words [first, last) of a text's words
Table = tuple[int, int, int]  # a pipe table's start, end of its header rows, end
_PIECE = re.compile(rf"\S{{1,{MAX_TOKEN_CHARS}}}")  # a word, or a piece of an overlong one


@dataclass(frozen=True)
class Chunk:
    """A child: ``section.text[start:end]`` (after a table's header rows, for a later piece)."""

    id: str
    section: Section
    text: str
    start: int
    end: int


def chunk_header(chunk: Chunk, mode: ChunkHeader) -> str | None:
    """The header ``chunk`` is indexed under: a paragraph deep in an article rarely names it.

    Example:
        >>> doc = SourceDocument(doc_id="d", text="", source="d.md", title=None)
        >>> section = Section("s", doc, ("Oil crisis", "Effects"), "", 0, 0, 0)
        >>> chunk_header(Chunk("c", section, "Prices rose.", 0, 12), "path")
        'Oil crisis / Effects'
    """
    path = chunk.section.path
    if chunk.start < chunk.section.body_start:
        path = path[:-1]
    return _header(chunk.section.document.title, path, mode)


def section_metadata(section: Section) -> dict[str, Any]:
    doc = section.document
    return {
        **doc.metadata,
        "doc_id": doc.doc_id,
        "source": doc.source,
        "namespace": doc.namespace,
        "title": doc.title,
        "section_path": list(section.path),
        "start": section.start,
        "end": section.end,
    }


def chunk_metadata(chunk: Chunk, header: ChunkHeader) -> dict[str, Any]:
    metadata = {
        **section_metadata(chunk.section),
        "parent_id": chunk.section.id,
        "start": chunk.start,
        "end": chunk.end,
    }
    text = chunk_header(chunk, header)
    if text and text != chunk.section.document.title:  # a title alone is read from "title"
        metadata[HEADER_KEY] = text
    return metadata


def _header(title: str | None, path: tuple[str, ...], mode: ChunkHeader) -> str | None:
    if mode == "title":
        return title
    parts = dict.fromkeys(p.strip() for p in (title, *path) if p and p.strip())
    return " / ".join(parts) or None


@dataclass(frozen=True)
class ModelWindow:
    """An embedder's input window (content tokens) and its tokenizer's count of each text's."""

    tokens: int
    count: Callable[[list[str]], list[int]]

    @classmethod
    def of(cls, embedder: object) -> ModelWindow | None:
        tokens = getattr(embedder, "input_window", None)
        count = getattr(embedder, "count_tokens", None)
        if isinstance(tokens, int) and tokens > 0 and callable(count):
            return cls(tokens, count)
        return None


def chunk_documents(
    documents: Iterable[SourceDocument], config: ChunkingConfig, window: ModelWindow | None = None
) -> tuple[list[Section], list[Chunk]]:
    """All sections and chunks; with ``config.window == "embedder"`` each chunk's indexed text
    also fits ``window``. Ids are unique and stable (an exact repeat hashes a count)."""
    sections: list[Section] = []
    chunks: list[Chunk] = []
    unique_id = _UniqueIds()
    fit = window if config.window == "embedder" else None
    for doc in documents:
        headings = find_headings(doc.text, doc.format)
        if doc.title is None:
            doc = dataclasses.replace(doc, title=document_title(headings))
        for path, start, end, body in section_spans(doc.text, headings):
            text = doc.text[start:end]
            parent_id = unique_id("section", doc.namespace, doc.doc_id, *path, text)
            section = Section(parent_id, doc, path, text, start, end, body)
            sections.append(section)
            tables = _tables(text)
            for c_start, c_end in passage_windows(text, config, _bound(text, section, config, fit)):
                head = _repeated_head(text, tables, c_start, config)
                c_text = ("" if head is None else text[slice(*head)]) + text[c_start:c_end]
                chunk_id = unique_id("chunk", doc.namespace, doc.doc_id, *path, c_text)
                chunks.append(Chunk(chunk_id, section, c_text, c_start, c_end))
    return sections, chunks


class Bound:
    """At most ``words`` words in a chunk and, given their model tokens, ``budget`` of those."""

    def __init__(self, words: int, costs: list[int] | None = None, budget: int = 0) -> None:
        self.words = words
        self.prefix = None if costs is None else list(itertools.accumulate(costs, initial=0))
        self.budget = budget

    def fits(self, first: int, last: int) -> bool:
        if last - first > self.words:
            return False
        return self.prefix is None or self.prefix[last] - self.prefix[first] <= self.budget

    def end(self, first: int, limit: int) -> int:
        last = min(first + self.words, limit)
        if self.prefix is not None:
            top = self.prefix[first] + self.budget
            last = min(last, bisect.bisect_right(self.prefix, top, first, last + 1) - 1)
        return max(last, first + 1)

    def shifted(self, offset: int) -> Bound:
        out = Bound(self.words)
        if self.prefix is not None:
            out.prefix = [p - self.prefix[offset] for p in self.prefix[offset:]]
            out.budget = self.budget
        return out

    def less(self, first: int, last: int) -> Bound:
        out = Bound(self.words - (last - first))
        if self.prefix is not None:
            out.prefix = self.prefix
            out.budget = max(self.budget - (self.prefix[last] - self.prefix[first]), 1)
        return out


def _bound(
    text: str, section: Section, config: ChunkingConfig, window: ModelWindow | None
) -> Bound | None:
    if window is None:
        return None
    words = _PIECE.findall(text)
    if not words:
        return None
    header = _header(section.document.title, section.path, config.header)
    counts = window.count([*words, header] if header else words)
    head = counts.pop() if header else 0
    return Bound(config.chunk_tokens, counts, max(window.tokens - head, 1))


def passage_windows(text: str, config: ChunkingConfig, bound: Bound | None = None) -> list[Span]:
    """Character spans of the child chunks of ``text``: paragraphs, fragments (under a quarter
    of ``chunk_tokens``) joined, long ones cut at sentence ends, overlapping by whole sentences."""
    spans = [m.span() for m in _PIECE.finditer(text)]  # an overlong word is several pieces
    if not spans:
        return []
    fits = bound or Bound(config.chunk_tokens)
    tables = _tables(text)
    starts = [start for start, _ in spans]

    def fits_at(word: int) -> Bound:
        head = _repeated_head(text, tables, starts[word], config)
        if head is None:
            return fits
        return fits.less(bisect.bisect_left(starts, head[0]), bisect.bisect_left(starts, head[1]))

    out: list[Span] = []
    for first, last in _join_fragments(_paragraphs(text, spans), config, fits):
        if fits_at(first).fits(first, last):
            out.append((spans[first][0], spans[last - 1][1]))
        else:
            out.extend(_cut(text, spans, first, last, config, fits_at, tables))
    return out


def _tables(text: str) -> list[Table]:
    if "|" not in text:
        return []
    lines = text.splitlines(keepends=True)
    offsets = list(itertools.accumulate(map(len, lines), initial=0))
    found: list[Table] = []
    i = 0
    while i + 1 < len(lines):
        if "|" in lines[i] and _TABLE_DELIMITER.fullmatch(lines[i + 1].rstrip("\r\n")):
            j = i + 2
            while j < len(lines) and "|" in lines[j] and lines[j].strip():
                j += 1
            found.append((offsets[i], offsets[i + 2], offsets[j]))
            i = j
        else:
            i += 1
    return found


def _repeated_head(
    text: str, tables: list[Table], start: int, config: ChunkingConfig
) -> Span | None:
    """The header rows a chunk starting among a table's rows repeats (at most half of it)."""
    for t_start, head_end, t_end in tables:
        if head_end <= start < t_end:
            words = len(_PIECE.findall(text, t_start, head_end))
            return (t_start, head_end) if words <= config.chunk_tokens // 2 else None
    return None


def _paragraphs(text: str, spans: list[Span]) -> list[Span]:
    out: list[Span] = []
    first = 0
    width = wrap_width(text)
    for i in range(1, len(spans)):
        if paragraph_break(text, spans[i - 1][1], spans[i][0], width=width):
            out.append((first, i))
            first = i
    out.append((first, len(spans)))
    return out


def _cut(
    text: str,
    spans: list[Span],
    first: int,
    last: int,
    config: ChunkingConfig,
    fits_at: Callable[[int], Bound],
    tables: list[Table],
) -> list[Span]:
    """The pieces of an overlong paragraph: whole sentences (a table's rows) where they fit."""
    sentences: list[Span] = []
    start = first
    for i in range(first, last):
        table = next((t for t in tables if t[0] <= spans[i][0] < t[2]), None)
        if table is None:
            ends = SENTENCE_END.search(text, spans[i][0], spans[i][1]) is not None
        else:  # a row ends at its line's end; the header row and the delimiter are one unit
            line_end = i + 1 == last or "\n" in text[spans[i][1] : spans[i + 1][0]]
            ends = line_end and spans[i][1] > text.find("\n", table[0])
        if ends:
            sentences.append((start, i + 1))
            start = i + 1
    if start < last:
        sentences.append((start, last))
    pieces: list[Span] = []
    i = 0
    while i < len(sentences):
        a, b = sentences[i]
        fits = fits_at(a)
        if not fits.fits(a, b):
            offset = spans[a][0]
            sentence = text[offset : spans[b - 1][1]]
            windows = token_windows(sentence, config, fits.shifted(a))
            pieces.extend((offset + s, offset + e) for s, e in windows)
            i += 1
            continue
        j = i + 1
        while j < len(sentences) and fits.fits(a, sentences[j][1]):
            j += 1
        pieces.append((spans[a][0], spans[sentences[j - 1][1] - 1][1]))
        if j == len(sentences):
            break
        back = j  # the next piece repeats the last sentences, at most overlap_tokens words
        while (
            back - 1 > i and sentences[j - 1][1] - sentences[back - 1][0] <= config.overlap_tokens
        ):
            back -= 1
        if not fits_at(sentences[back][0]).fits(sentences[back][0], sentences[j][1]):
            back = j
        i = back
    return pieces


def _join_fragments(paragraphs: list[Span], config: ChunkingConfig, fits: Bound) -> list[Span]:
    small = max(config.chunk_tokens // 4, 1)
    out: list[Span] = []
    for a, b in paragraphs:
        if out and out[-1][1] - out[-1][0] < small:
            out[-1] = (out[-1][0], b)
        else:
            out.append((a, b))
    if len(out) > 1 and out[-1][1] - out[-1][0] < small:
        (a, _), (_, b) = out[-2], out[-1]
        if fits.fits(a, b):
            out[-2:] = [(a, b)]
    return out


def token_windows(text: str, config: ChunkingConfig, bound: Bound | None = None) -> list[Span]:
    """Spans of windows of ``chunk_tokens`` tokens (``chunk_tokens * MAX_TOKEN_CHARS``
    characters at most), overlapping by ``overlap_tokens``, that cover every token of ``text``."""
    spans = [m.span() for m in _PIECE.finditer(text)]
    starts = [start for start, _ in spans]
    ends = [end for _, end in spans]
    most_chars = config.chunk_tokens * MAX_TOKEN_CHARS
    fits = bound or Bound(config.chunk_tokens)
    windows: list[Span] = []
    first = 0
    while first < len(starts):
        last = fits.end(first, len(starts))
        if ends[last - 1] - starts[first] > most_chars:  # whitespace runs: cut at the bound
            last = max(
                bisect.bisect_right(ends, starts[first] + most_chars, first, last), first + 1
            )
        windows.append((starts[first], ends[last - 1]))
        if last == len(starts):
            break
        first = max(last - config.overlap_tokens, first + 1)
        if ends[last] - starts[first] > most_chars:  # the next window must reach token last
            first = bisect.bisect_left(starts, ends[last] - most_chars, first, last)
    return windows


class _UniqueIds:
    """sha256 ids, a repeat's counted on from the last (n repeats cost n hashes, not n * n / 2)."""

    def __init__(self) -> None:
        self.seen: set[str] = set()
        self.repeats: dict[str, int] = {}

    def __call__(self, *parts: str) -> str:
        base = "\x1f".join(parts)
        first = _sha256(base)
        repeat = self.repeats.get(first, 0)
        while True:
            digest = (_sha256(f"{base}\x1f{repeat}") if repeat else first)[:16]
            if digest not in self.seen:
                self.seen.add(digest)
                self.repeats[first] = repeat + 1
                return digest
            repeat += 1


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
