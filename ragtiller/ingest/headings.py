"""Sections: a document's text split at its headings (Markdown ATX and setext headings outside
code fences, reStructuredText underlined titles), each with its heading path."""

from __future__ import annotations

import itertools
import re

from ragtiller.index.units import TextFormat

_MD_HEADING = re.compile(r"(#{1,6})[ \t]+(.+?)[ \t#]*")
_MD_FENCE = re.compile(r"(```|~~~)")
_MD_SETEXT = re.compile(r"={3,}|-{3,}")
_RST_ADORNMENT = re.compile(r"([=\-`:'\"~^_*+#.<>])\1+")
Heading = tuple[int, int, int, str]  # start, body start, level, title
SectionSpan = tuple[tuple[str, ...], int, int, int]  # heading path, start, end, body offset


def document_title(headings: list[Heading]) -> str | None:
    """The title of a document with these headings: its only top-level heading, or None.

    Example:
        >>> document_title(_markdown_headings("# Jobs\\n\\nText.\\n\\n## Retries\\n\\nMore."))
        'Jobs'
    """
    top = [title for _, _, level, title in headings if level == 1]
    return top[0] if len(top) == 1 else None


def find_headings(text: str, fmt: TextFormat) -> list[Heading]:
    finder = {"markdown": _markdown_headings, "rst": _rst_headings}.get(fmt)
    return finder(text) if finder else []


def section_spans(text: str, headings: list[Heading]) -> list[SectionSpan]:
    """Each section with a non-blank body, its span stripped of surrounding whitespace."""
    bounds = [(0, 0, 0, ""), *headings, (len(text), len(text), 0, "")]
    stack: list[tuple[int, str]] = []
    out: list[SectionSpan] = []
    for (start, body, level, title), (nxt, _, _, _) in itertools.pairwise(bounds):
        if level:
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, title))
        if not text[body:nxt].strip():
            continue
        segment = text[start:nxt]
        s, e = start + len(segment) - len(segment.lstrip()), start + len(segment.rstrip())
        out.append((tuple(t for _, t in stack), s, e, max(body - s, 0)))
    return out


def _markdown_headings(text: str) -> list[Heading]:
    found: list[Heading] = []
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


def _rst_headings(text: str) -> list[Heading]:
    # levels follow the order in which adornment styles first appear
    lines = text.splitlines(keepends=True)
    offsets = list(itertools.accumulate(map(len, lines), initial=0))
    styles: dict[tuple[str, bool], int] = {}
    found: list[Heading] = []
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
