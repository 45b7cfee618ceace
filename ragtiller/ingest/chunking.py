"""Hierarchical chunking: documents -> parent sections (by heading) -> child chunks (passages).

Children follow the author's units: a paragraph is a passage; a fragment (a heading line, a
one-line paragraph) joins its neighbour; only a paragraph longer than ``chunk_tokens`` words is
cut, at sentence ends where it has them, and its pieces overlap by whole sentences. A pipe
table is cut between rows, and each piece after the first repeats its header row.
"""

from __future__ import annotations

import bisect
import dataclasses
import hashlib
import itertools
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ragtiller.index.units import (
    MAX_TOKEN_CHARS,
    SENTENCE_END,
    ChunkHeader,
    ChunkingConfig,
    Section,
    SourceDocument,
    TextFormat,
    paragraph_break,
    wrap_width,
)

_MD_HEADING = re.compile(r"(#{1,6})[ \t]+(.+?)[ \t#]*")
_MD_FENCE = re.compile(r"(```|~~~)")
_MD_SETEXT = re.compile(r"={3,}|-{3,}")
_RST_ADORNMENT = re.compile(r"([=\-`:'\"~^_*+#.<>])\1+")
_TABLE_DELIMITER = re.compile(r"[ \t]*\|?([ \t]*:?-+:?[ \t]*\|)+([ \t]*:?-+:?[ \t]*)?\|?[ \t]*")
"""A pipe table's delimiter row (``|---|:--:|``), which follows its header row."""
Heading = tuple[int, int, int, str]
"""``(start, body_start, level, title)`` of a heading in a document's text."""
_PIECE = re.compile(rf"\S{{1,{MAX_TOKEN_CHARS}}}")
"""A token: a word, or a MAX_TOKEN_CHARS-character piece of a longer one."""


@dataclass(frozen=True)
class Chunk:
    """A child: a run of at most ``chunk_tokens`` words of one section.

    Attributes:
        id: Stable id (hash of namespace, document id, section path and chunk text).
        section: The parent section.
        text: ``section.text[start:end]``; a piece of a pipe table after its first is
            preceded by the table's header and delimiter rows.
        start: Offset in the parent text, in characters.
        end: End offset (exclusive) in the parent text, in characters.
    """

    id: str
    section: Section
    text: str
    start: int
    end: int


def chunk_header(chunk: Chunk, mode: ChunkHeader) -> str | None:
    """The header ``chunk`` is indexed under (see :data:`ChunkHeader`); None: no header.

    A paragraph deep in a long article rarely names the article, so its words alone cannot
    match a question that does; the heading path names it. Repeated titles appear once, and a
    chunk whose text holds its section's heading line is not given that heading again.

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


def section_header(section: Section, mode: ChunkHeader) -> str | None:
    """The longest header a chunk of ``section`` is indexed under (see :func:`chunk_header`)."""
    return _header(section.document.title, section.path, mode)


def _header(title: str | None, path: tuple[str, ...], mode: ChunkHeader) -> str | None:
    if mode == "title":
        return title
    parts = dict.fromkeys(p.strip() for p in (title, *path) if p and p.strip())
    return " / ".join(parts) or None


@dataclass(frozen=True)
class ModelWindow:
    """An embedder's input window: the tokens it reads of one text, and its tokenizer's count.

    Attributes:
        tokens: Content tokens the model reads (special tokens excluded); the rest is cut.
        count: Each text's content tokens, as the model's tokenizer counts them.
    """

    tokens: int
    count: Callable[[list[str]], list[int]]

    @classmethod
    def of(cls, embedder: object) -> ModelWindow | None:
        """The window an embedder declares (``input_window`` and ``count_tokens``), or None."""
        tokens, count = (
            getattr(embedder, "input_window", None),
            getattr(embedder, "count_tokens", None),
        )
        if isinstance(tokens, int) and tokens > 0 and callable(count):
            return cls(tokens, count)
        return None


def chunk_documents(
    documents: Iterable[SourceDocument],
    config: ChunkingConfig,
    window: ModelWindow | None = None,
) -> tuple[list[Section], list[Chunk]]:
    """Cut documents into sections and sections into chunks.

    A Markdown or reStructuredText document without a title takes its only top-level heading
    (a Markdown H1, the first heading style of reStructuredText) as its title, if it has one.
    Ids are unique across the result: an exact repeat (same document, path and text) gets a
    counter mixed into its hash, so ids stay stable as long as the corpus is the same. With
    ``config.window == "embedder"`` and a ``window``, each chunk's indexed text (its header,
    then the chunk) also fits ``window.tokens`` model tokens.

    Returns:
        All sections and all chunks, in document order.
    """
    sections: list[Section] = []
    chunks: list[Chunk] = []
    unique_id = _UniqueIds()
    fit = window if config.window == "embedder" else None
    for doc in documents:
        headings = _headings(doc.text, doc.format)
        if doc.title is None:
            doc = dataclasses.replace(doc, title=document_title(headings))
        for path, start, end, body in _sections(doc.text, headings):
            text = doc.text[start:end]
            parent_id = unique_id("section", doc.namespace, doc.doc_id, *path, text)
            section = Section(parent_id, doc, path, text, start, end, body)
            sections.append(section)
            bound = _bound(text, section, config, fit)
            tables = _tables(text)
            for c_start, c_end in passage_windows(text, config, bound):
                head = _repeated_head(text, tables, c_start, config)
                c_text = (
                    text[c_start:c_end]
                    if head is None
                    else text[slice(*head)] + text[c_start:c_end]
                )
                chunk_id = unique_id("chunk", doc.namespace, doc.doc_id, *path, c_text)
                chunks.append(Chunk(chunk_id, section, c_text, c_start, c_end))
    return sections, chunks


def split_sections(text: str, fmt: TextFormat) -> list[tuple[tuple[str, ...], int, int, int]]:
    """Split a document at its headings.

    Args:
        text: The document text.
        fmt: ``markdown`` splits on ATX and setext headings outside code fences, ``rst`` on
            underlined (optionally overlined) titles; ``text`` keeps one section.

    Returns:
        ``(path, start, end, body_start)`` per non-empty section: the heading path, the stripped
        span in ``text`` and where the body begins relative to ``start``. Sections whose body
        is blank (a heading directly followed by a sub-heading) are dropped.
    """
    return _sections(text, _headings(text, fmt))


def document_title(headings: list[Heading]) -> str | None:
    """The title of a document with these headings: its only top-level heading, or None.

    Example:
        >>> document_title(_markdown_headings("# Jobs\\n\\nText.\\n\\n## Retries\\n\\nMore."))
        'Jobs'
    """
    top = [title for _, _, level, title in headings if level == 1]
    return top[0] if len(top) == 1 else None


def _headings(text: str, fmt: TextFormat) -> list[Heading]:
    finder = {"markdown": _markdown_headings, "rst": _rst_headings}.get(fmt)
    return finder(text) if finder else []


def _sections(text: str, headings: list[Heading]) -> list[tuple[tuple[str, ...], int, int, int]]:
    bounds = [(0, 0, 0, ""), *headings, (len(text), len(text), 0, "")]
    stack: list[tuple[int, str]] = []
    out: list[tuple[tuple[str, ...], int, int, int]] = []
    for (start, body, level, title), (nxt, _, _, _) in itertools.pairwise(bounds):
        if level:
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, title))
        if not text[body:nxt].strip():
            continue
        s, e = start, nxt
        while text[s].isspace():
            s += 1
        while text[e - 1].isspace():
            e -= 1
        out.append((tuple(t for _, t in stack), s, e, max(body - s, 0)))
    return out


WordRange = tuple[int, int]
"""Words ``[first, last)`` of a text, by index into its whitespace-separated words."""


class Bound:
    """Whether a run of words may be one chunk: at most ``words`` words and, with model token
    counts per word, at most ``budget`` of them.

    Args:
        words: ``chunk_tokens``.
        costs: Model tokens of each word (aligned with the section's words); None: no budget.
        budget: Model tokens a chunk may hold (the window less the header's).
    """

    def __init__(self, words: int, costs: list[int] | None = None, budget: int = 0) -> None:
        self.words = words
        self.prefix = None if costs is None else list(itertools.accumulate(costs, initial=0))
        self.budget = budget

    def fits(self, first: int, last: int) -> bool:
        """Whether words ``first`` to ``last`` (exclusive) may be one chunk."""
        if last - first > self.words:
            return False
        return self.prefix is None or self.prefix[last] - self.prefix[first] <= self.budget

    def end(self, first: int, limit: int) -> int:
        """The furthest ``last <= limit`` with words ``first:last`` fitting; one word at least."""
        last = min(first + self.words, limit)
        if self.prefix is not None:
            top = self.prefix[first] + self.budget
            last = min(last, bisect.bisect_right(self.prefix, top, first, last + 1) - 1)
        return max(last, first + 1)

    def shifted(self, offset: int) -> Bound:
        """The same bound over the words from ``offset`` on (a sentence cut on its own)."""
        out = Bound(self.words)
        if self.prefix is not None:
            out.prefix = [p - self.prefix[offset] for p in self.prefix[offset:]]
            out.budget = self.budget
        return out

    def less(self, first: int, last: int) -> Bound:
        """This bound less room for words ``first:last`` (a table's header, repeated)."""
        out = Bound(self.words - (last - first))
        if self.prefix is not None:
            out.prefix = self.prefix
            out.budget = max(self.budget - (self.prefix[last] - self.prefix[first]), 1)
        return out


def _bound(
    text: str, section: Section, config: ChunkingConfig, window: ModelWindow | None
) -> Bound | None:
    """The model-token bound of ``text``'s chunks, or None (words alone bound them)."""
    if window is None:
        return None
    words = [text[a:b] for a, b in (m.span() for m in _PIECE.finditer(text))]
    if not words:
        return None
    header = section_header(section, config.header)
    counts = window.count([*words, header] if header else words)
    head = counts.pop() if header else 0
    return Bound(config.chunk_tokens, counts, max(window.tokens - head, 1))


def passage_windows(
    text: str, config: ChunkingConfig, bound: Bound | None = None
) -> list[tuple[int, int]]:
    """Character spans of the child chunks of ``text``: paragraphs, fragments joined, long ones cut.

    Paragraphs are separated by blank lines (in a text without any, by line ends, as
    :func:`~ragtiller.index.units.paragraph_break` reads them). One of at most
    ``chunk_tokens`` words is one chunk; a longer one is cut into pieces of at most
    ``chunk_tokens`` words that end at sentence ends (a word ending in ``.``, ``!`` or ``?``)
    where it has them and overlap by the whole sentences (at most ``overlap_tokens`` words)
    before the cut. A paragraph shorter than a quarter of
    ``chunk_tokens`` (a heading line, a one-line paragraph) joins the next one before any cut;
    the last one joins the one before when both fit in one chunk. Every word is in some chunk.

    Example:
        >>> text = "# Title\\n\\nFirst paragraph, four words.\\n\\nThe second paragraph, five."
        >>> config = ChunkingConfig(chunk_tokens=12, overlap_tokens=2)
        >>> [text[s:e] for s, e in passage_windows(text, config)]
        ['# Title\\n\\nFirst paragraph, four words.', 'The second paragraph, five.']
    """
    spans = [m.span() for m in _PIECE.finditer(text)]  # an overlong word is several pieces
    if not spans:
        return []
    fits = bound or Bound(config.chunk_tokens)
    tables = _tables(text)
    starts = [start for start, _ in spans]

    def fits_at(word: int) -> Bound:
        """The bound of a chunk starting at ``word``: less its table's header, if repeated."""
        head = _repeated_head(text, tables, starts[word], config)
        if head is None:
            return fits
        return fits.less(bisect.bisect_left(starts, head[0]), bisect.bisect_left(starts, head[1]))

    out: list[tuple[int, int]] = []
    for first, last in _join_fragments(_paragraphs(text, spans), config, fits):
        if fits_at(first).fits(first, last):
            out.append((spans[first][0], spans[last - 1][1]))
        else:
            out.extend(_cut(text, spans, first, last, config, fits_at, tables))
    return out


def _tables(text: str) -> list[tuple[int, int, int]]:
    """``(start, head_end, end)`` of each pipe table in ``text``: a header row, a delimiter
    row (``|---|---|``), then the rows up to a blank line or a line without ``|``."""
    if "|" not in text:
        return []
    lines = text.splitlines(keepends=True)
    offsets = list(itertools.accumulate(map(len, lines), initial=0))
    found: list[tuple[int, int, int]] = []
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
    text: str, tables: list[tuple[int, int, int]], start: int, config: ChunkingConfig
) -> tuple[int, int] | None:
    """The span of the header rows a chunk starting at ``start`` repeats: a table's, when the
    chunk starts among its rows and the header holds at most half of ``chunk_tokens`` words."""
    for t_start, head_end, t_end in tables:
        if head_end <= start < t_end:
            words = len(_PIECE.findall(text, t_start, head_end))
            return (t_start, head_end) if words <= config.chunk_tokens // 2 else None
    return None


def _paragraphs(text: str, spans: list[tuple[int, int]]) -> list[WordRange]:
    """Word ranges of the paragraphs (see :func:`~ragtiller.index.units.paragraph_break`)."""
    out: list[WordRange] = []
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
    spans: list[tuple[int, int]],
    first: int,
    last: int,
    config: ChunkingConfig,
    fits_at: Callable[[int], Bound],
    tables: list[tuple[int, int, int]],
) -> list[tuple[int, int]]:
    """Character spans of the pieces of an overlong paragraph: whole sentences (table rows, in
    a table), within ``fits_at`` of their first word; a longer one is cut by
    :func:`token_windows`."""
    sentences: list[WordRange] = []
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
    pieces: list[tuple[int, int]] = []
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


def _join_fragments(
    paragraphs: list[WordRange], config: ChunkingConfig, fits: Bound
) -> list[WordRange]:
    """Paragraphs shorter than a quarter of ``chunk_tokens`` joined to the next one (the last
    to the one before, if the two fit in one chunk); a joined paragraph too long is cut later."""
    small = max(config.chunk_tokens // 4, 1)
    out: list[WordRange] = []
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


def token_windows(
    text: str, config: ChunkingConfig, bound: Bound | None = None
) -> list[tuple[int, int]]:
    """Character spans of overlapping word windows that together cover every word of ``text``.

    A window holds at most ``chunk_tokens`` tokens (words, or :data:`MAX_TOKEN_CHARS`-character
    pieces of longer words) and spans at most ``chunk_tokens * MAX_TOKEN_CHARS`` characters.
    Consecutive windows share ``overlap_tokens`` tokens, fewer only where the character bound
    would be broken (a long run of whitespace); the last window may be shorter.
    """
    spans = [m.span() for m in _PIECE.finditer(text)]
    starts = [start for start, _ in spans]
    ends = [end for _, end in spans]
    del spans
    most_chars = config.chunk_tokens * MAX_TOKEN_CHARS
    fits = bound or Bound(config.chunk_tokens)
    windows: list[tuple[int, int]] = []
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


def _markdown_headings(text: str) -> list[tuple[int, int, int, str]]:
    """``(line_start, body_start, level, title)`` of each heading outside code fences.

    ATX headings (``# Title``) and setext headings (a line underlined with ``===`` for level 1
    or ``---`` for level 2, after a blank line or the start of the text).
    """
    found: list[tuple[int, int, int, str]] = []
    fence: str | None = None
    lines = text.splitlines(keepends=True)
    offset = 0
    for i, line in enumerate(lines):
        stripped = line.strip()
        m_fence = _MD_FENCE.match(stripped)
        if m_fence:
            fence = None if fence == m_fence.group(1) else fence or m_fence.group(1)
        elif fence is None:
            m = _MD_HEADING.fullmatch(line.rstrip("\r\n"))
            under = _MD_SETEXT.fullmatch(lines[i + 1].strip()) if i + 1 < len(lines) else None
            if m:
                found.append((offset, offset + len(line), len(m.group(1)), m.group(2).strip()))
            elif under and stripped and (i == 0 or not lines[i - 1].strip()):
                level = 1 if under.group(0)[0] == "=" else 2
                found.append((offset, offset + len(line) + len(lines[i + 1]), level, stripped))
        offset += len(line)
    return found


def _rst_headings(text: str) -> list[tuple[int, int, int, str]]:
    """``(title_start, body_start, level, title)`` of each reStructuredText section title.

    A title is an unindented line followed by an adornment line (one repeated punctuation
    character) at least as long as the title, preceded by a blank line, the start of the text,
    or an overline of the same adornment. Levels follow the order adornment styles first appear.
    """
    lines = text.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    styles: dict[tuple[str, bool], int] = {}
    found: list[tuple[int, int, int, str]] = []
    for i in range(len(lines) - 1):
        title, under = lines[i].rstrip(), lines[i + 1].rstrip()
        if not title or title[0].isspace() or _RST_ADORNMENT.fullmatch(title):
            continue
        if not _RST_ADORNMENT.fullmatch(under) or len(under) < len(title):
            continue
        above = lines[i - 1].rstrip() if i else ""
        overlined = above == under
        if above and not overlined:
            continue
        level = styles.setdefault((under[0], overlined), len(styles) + 1)
        start = offsets[i - 1] if overlined else offsets[i]
        found.append((start, offsets[i + 2], level, title.strip()))
    return found


class _UniqueIds:
    """16-hex-digit sha256 ids of parts, made unique by a repeat counter mixed into the hash.

    The n-th repeat of the same parts starts counting where the one before stopped, so a text
    repeated n times costs n hashes, not n * n / 2; the ids are the ones counting from 0 gives.
    """

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
