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
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ragtiller.core.filters import predicate
from ragtiller.errors import IndexStoreError
from ragtiller.index.records import RecordTable, namespace_of
from ragtiller.index.units import Section

SUMMARY_CHARS = 120
_SENTENCE = re.compile(r"(.+?[.!?])(?=\s|$)")
_MARKUP = re.compile(r"[`*]+|^#+\s*")


_MAX_DOCUMENTS, _MAX_SECTIONS, _MAX_CHARS = 60, 8, 4000


def build_corpus_map(
    sections: Sequence[Section],
    *,
    max_documents: int = _MAX_DOCUMENTS,
    max_sections: int = _MAX_SECTIONS,
    max_chars: int = _MAX_CHARS,
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
    blocks = ((d, len(s), s[:max_sections]) for d, s in grouped.items())
    return _outline(len(grouped), len(sections), blocks, max_documents, max_sections, max_chars)


def _outline(
    documents: int,
    sections: int,
    blocks: Iterable[tuple[str, int, Sequence[Section]]],
    max_documents: int,
    max_sections: int,
    max_chars: int,
) -> str:
    """The outline of ``documents`` documents holding ``sections`` sections; ``blocks``: per
    document in order, its id, its number of sections and its first ``max_sections`` ones
    (read only as far as the outline gets)."""
    if not documents:
        return ""
    header = f"Corpus: {documents} documents, {sections} sections."
    lines = [header]
    used = len(header)
    listed = 0
    for doc_id, total, first in blocks:
        if listed == max_documents:
            break
        block = _document_block(doc_id, first, total, max_sections)
        size = sum(len(line) + 1 for line in block)
        # keep room for the closing "... and N more documents" line
        if used + size > max_chars - 40:
            break
        lines.extend(block)
        used += size
        listed += 1
    if listed < documents:
        lines.append(f"... and {documents - listed} more documents")
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


def _document_block(
    doc_id: str, sections: Sequence[Section], total: int, max_sections: int
) -> list[str]:
    doc = sections[0].document
    label = doc.title if doc.title and doc.title != doc_id else doc_id
    if total == 1 and not sections[0].path:
        return [f"- {label}: {_section_summary(sections[0])}"]
    block = [f"- {label}"]
    for section in sections[:max_sections]:
        name = " > ".join(section.path) or "(introduction)"
        block.append(f"  - {name}: {_section_summary(section)}")
    if total > max_sections:
        block.append(f"  - ... and {total - max_sections} more sections")
    return block


def _section_summary(section: Section) -> str:
    return summarize(section.text[section.body_start :]) or summarize(section.text)


OUTLINE_FILE = "corpus_outline.npz"
"""The saved :class:`OutlineRows` of a version, written at ingest with the derived files."""


@dataclass(frozen=True)
class OutlineRows:
    """Per namespace, its section rows and the document of each: what an outline of any scope
    needs without parsing every section (at 1M chunks that parse took 6 s of the first broad
    turn). Namespace ``namespaces[i]`` owns entries ``offsets[i]:offsets[i + 1]`` of ``rows``
    and ``docs``, rows ascending; a scope reads only its own namespaces' entries, and then
    parses only the sections its outline lists. ``docs`` are document ordinals (equal doc ids,
    equal ordinals: sections group by doc id, as :func:`build_corpus_map` groups them).
    """

    namespaces: tuple[str, ...]
    offsets: npt.NDArray[np.int64]
    rows: npt.NDArray[np.int32]
    docs: npt.NDArray[np.int32]

    @classmethod
    def of(cls, sections: RecordTable) -> OutlineRows:
        """Built from the section table in one pass, at ingest."""
        spaces: dict[str, int] = {}
        doc_ids: dict[str, int] = {}
        space = np.empty(len(sections), dtype=np.int32)
        docs = np.empty(len(sections), dtype=np.int32)
        for row, (_, _, md) in enumerate(sections.items()):
            space[row] = spaces.setdefault(namespace_of(md), len(spaces))
            docs[row] = doc_ids.setdefault(str(md.get("doc_id")), len(doc_ids))
        order = np.argsort(space, kind="stable").astype(np.int32)
        counts = np.bincount(space, minlength=len(spaces))
        offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        return cls(tuple(spaces), offsets, order, docs[order])

    def scope(
        self, namespaces: Sequence[str] | None
    ) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.int32]]:
        """Section rows (ascending) and their document ordinals, of ``namespaces`` only."""
        wanted = None if namespaces is None else set(namespaces)
        parts = [
            slice(int(self.offsets[i]), int(self.offsets[i + 1]))
            for i, name in enumerate(self.namespaces)
            if wanted is None or name in wanted
        ]
        if len(parts) == 1:
            return self.rows[parts[0]], self.docs[parts[0]]
        rows = np.concatenate([self.rows[p] for p in parts] or [self.rows[:0]])
        docs = np.concatenate([self.docs[p] for p in parts] or [self.docs[:0]])
        order = np.argsort(rows, kind="stable")
        return rows[order], docs[order]

    def save(self, path: Path) -> None:
        """Write the arrays to ``path`` (an ``.npz``, no pickles)."""
        with path.open("wb") as f:
            np.savez(
                f,
                namespaces=np.array(self.namespaces, dtype=np.str_),
                offsets=self.offsets,
                rows=self.rows,
                docs=self.docs,
            )

    @classmethod
    def load(cls, path: Path, sections: int) -> OutlineRows:
        """Read what :meth:`save` wrote for a table of ``sections`` rows, checked.

        Raises:
            IndexStoreError: The file is unreadable or disagrees with the section table.
        """
        try:
            with np.load(path, allow_pickle=False) as data:
                names, offsets = data["namespaces"], data["offsets"]
                rows, docs = data["rows"], data["docs"]
        except (OSError, ValueError, KeyError) as e:
            raise IndexStoreError(f"index file {path} is corrupt: {e}") from e
        if (
            names.ndim != 1
            or offsets.shape != (len(names) + 1,)
            or rows.shape != (sections,)
            or docs.shape != (sections,)
            or (len(offsets) and (offsets[0] != 0 or offsets[-1] != sections))
            or np.any(np.diff(offsets) < 0)
            or (sections and (rows.min() < 0 or rows.max() >= sections or docs.min() < 0))
            or len(np.unique(rows)) != sections
        ):
            raise IndexStoreError(
                f"index file {path} is corrupt: it does not outline the {sections} sections of "
                "the index; re-ingest to rebuild it"
            )
        return cls(
            tuple(str(n) for n in names),
            offsets.astype(np.int64),
            rows.astype(np.int32),
            docs.astype(np.int32),
        )


SCOPES_KEPT = 64
"""Outlines kept per index, one per (namespaces, filter) asked for; older ones are rebuilt."""


class ScopedOverview:
    """The corpus map of the rows a turn may see, built on first use per scope and kept.

    Args:
        sections: The index's section table (the parents): their metadata carry the namespace
            and the document's own metadata (``tenant`` and the like) that tiers filter on.
        to_section: Turns row ``(id, text, metadata)`` back into a :class:`Section`.
        rows: The :class:`OutlineRows` of ``sections``.

    Example:
        >>> from ragtiller.index.records import RecordTable
        >>> rows = RecordTable(["s1"], ["Setup. Run make."], [{"doc_id": "a.md", "tenant": "acme"}])
        >>> outline = OutlineRows.of(rows)
        >>> overview = ScopedOverview(rows, lambda id_, text, md: NotImplemented, outline)
        >>> overview.outline(["default"], {"tenant": "globex"})  # nothing of acme's
        ''
    """

    def __init__(
        self,
        sections: RecordTable,
        to_section: Callable[[str, str, dict[str, Any]], Section],
        rows: OutlineRows,
    ) -> None:
        self._sections = sections
        self._to_section = to_section
        self._rows = rows
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
        rows, docs = self._rows.scope(namespaces)
        if filter:  # tested on the scope's own rows only
            passes = predicate(filter)
            metadatas = self._sections.metadatas
            keep = np.fromiter(
                (passes(metadatas[r]) for r in rows.tolist()), dtype=np.bool_, count=len(rows)
            )
            rows, docs = rows[keep], docs[keep]
        text = self._outline(rows, docs)
        with self._lock:
            self._kept[key] = text
            while len(self._kept) > SCOPES_KEPT:
                self._kept.popitem(last=False)
        return text

    def _outline(self, rows: npt.NDArray[np.int32], docs: npt.NDArray[np.int32]) -> str:
        """The outline of these section rows, parsing only the sections it lists."""
        if not len(rows):
            return ""
        by_doc = np.argsort(docs, kind="stable")  # each document's rows, in row order
        _, first, counts = np.unique(docs, return_index=True, return_counts=True)
        starts = np.concatenate([[0], np.cumsum(counts)])
        appearance = np.argsort(first, kind="stable")  # documents in order of first section
        table, to_section, most = self._sections, self._to_section, _MAX_SECTIONS

        def blocks() -> Iterator[tuple[str, int, list[Section]]]:
            for d in appearance.tolist():
                mine = rows[by_doc[starts[d] : starts[d] + min(int(counts[d]), most)]]
                listed = [to_section(*table.fields(r)) for r in mine.tolist()]
                yield listed[0].document.doc_id, int(counts[d]), listed

        return _outline(len(counts), len(rows), blocks(), _MAX_DOCUMENTS, most, _MAX_CHARS)
