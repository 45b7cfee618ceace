"""The corpus map: a bounded plain-text outline of documents and sections, built without an LLM.

The assemble node injects it as ``<project-overview>`` on broad turns, so that a question like
"what is in here?" gets an answer even when step-back could not run. A turn only ever sees the
outline of what it may search: :class:`ScopedOverview` builds one per namespace set and tenant
filter, from the same rows the tiers filter.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ragtiller.index.records import RecordTable
from ragtiller.index.units import Section

SUMMARY_CHARS = 120
_SENTENCE = re.compile(r"(.+?[.!?])(?=\s|$)")
_MARKUP = re.compile(r"[`*]+|^#+\s*")


def build_corpus_map(
    sections: Sequence[Section],
    *,
    max_documents: int = 60,
    max_sections: int = 8,
    max_chars: int = 4000,
) -> str:
    """Outline the corpus: one line per document, one per section with a one-line summary.

    Args:
        sections: Every section of the corpus, in document order.
        max_documents: Documents listed before ``... and N more documents``.
        max_sections: Sections listed per document before ``... and N more sections``.
        max_chars: Upper bound of the whole text, in characters.

    Returns:
        The outline; empty when there are no sections.

    Example:
        >>> build_corpus_map([])
        ''
    """
    grouped: dict[str, list[Section]] = {}
    for section in sections:
        grouped.setdefault(section.document.doc_id, []).append(section)
    if not grouped:
        return ""
    header = f"Corpus: {len(grouped)} documents, {len(sections)} sections."
    lines = [header]
    used = len(header)
    listed = 0
    for doc_id, doc_sections in grouped.items():
        block = _document_block(doc_id, doc_sections, max_sections)
        size = sum(len(line) + 1 for line in block)
        # keep room for the closing "... and N more documents" line
        if listed == max_documents or used + size > max_chars - 40:
            break
        lines.extend(block)
        used += size
        listed += 1
    if listed < len(grouped):
        lines.append(f"... and {len(grouped) - listed} more documents")
    return "\n".join(lines)


def summarize(text: str, limit: int = SUMMARY_CHARS) -> str:
    """The first sentence of ``text``, markup and whitespace collapsed, at most ``limit`` chars."""
    flat = " ".join(_MARKUP.sub("", line).strip() for line in text.splitlines())
    flat = " ".join(flat.split())
    match = _SENTENCE.match(flat)
    sentence = match.group(1) if match else flat
    if len(sentence) <= limit:
        return sentence
    cut = sentence[: limit - 1].rsplit(" ", 1)[0]
    return cut + "…"


def _document_block(doc_id: str, sections: Sequence[Section], max_sections: int) -> list[str]:
    doc = sections[0].document
    label = doc.title if doc.title and doc.title != doc_id else doc_id
    if len(sections) == 1 and not sections[0].path:
        return [f"- {label}: {_section_summary(sections[0])}"]
    block = [f"- {label}"]
    for section in sections[:max_sections]:
        name = " > ".join(section.path) or "(introduction)"
        block.append(f"  - {name}: {_section_summary(section)}")
    if len(sections) > max_sections:
        block.append(f"  - ... and {len(sections) - max_sections} more sections")
    return block


def _section_summary(section: Section) -> str:
    return summarize(section.text[section.body_start :]) or summarize(section.text)


SCOPES_KEPT = 64
"""Outlines kept per index, one per (namespaces, filter) asked for; older ones are rebuilt."""


class ScopedOverview:
    """The corpus map of the rows a turn may see, built on first use per scope and kept.

    Args:
        sections: The index's section table (the parents): their metadata carry the namespace
            and the document's own metadata (``tenant`` and the like) that tiers filter on.
        to_section: Turns row ``(id, text, metadata)`` back into a :class:`Section`.

    Example:
        >>> from ragtiller.index.records import RecordTable
        >>> rows = RecordTable(["s1"], ["Setup. Run make."], [{"doc_id": "a.md", "tenant": "acme"}])
        >>> overview = ScopedOverview(rows, lambda id_, text, md: NotImplemented)
        >>> overview.outline(["default"], {"tenant": "globex"})  # nothing of acme's
        ''
    """

    def __init__(
        self,
        sections: RecordTable,
        to_section: Callable[[str, str, dict[str, Any]], Section],
    ) -> None:
        self._sections = sections
        self._to_section = to_section
        self._kept: OrderedDict[tuple[Any, ...], str] = OrderedDict()
        self._lock = threading.Lock()

    def outline(self, namespaces: Sequence[str] | None, filter: Mapping[str, Any] | None) -> str:
        """The outline of the sections in ``namespaces`` whose metadata equals ``filter``
        (empty when none match)."""
        key = (
            None if namespaces is None else tuple(sorted(set(namespaces))),
            tuple(sorted((str(k), repr(v)) for k, v in (filter or {}).items())),
        )
        with self._lock:
            if key in self._kept:
                self._kept.move_to_end(key)
                return self._kept[key]
        table = self._sections
        mask = table.mask(namespaces, filter)
        rows = range(len(table)) if mask is None else np.flatnonzero(mask).tolist()
        text = build_corpus_map([self._to_section(*table.fields(r)) for r in rows])
        with self._lock:
            self._kept[key] = text
            while len(self._kept) > SCOPES_KEPT:
                self._kept.popitem(last=False)
        return text
