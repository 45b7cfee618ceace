"""The corpus map: a bounded outline of documents and sections, built without an LLM, for turns."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ragtiller.core.filters import predicate
from ragtiller.errors import IndexStoreError
from ragtiller.index.records import RecordTable, namespace_of
from ragtiller.index.units import Section, section_from_record

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
    """Outline the corpus: a line per document, one per section with a one-line summary."""
    grouped: dict[str, list[Section]] = {}
    for section in sections:
        grouped.setdefault(section.document.doc_id, []).append(section)
    blocks = ((len(s), s[:max_sections]) for s in grouped.values())
    return _outline(len(grouped), len(sections), blocks, max_documents, max_sections, max_chars)


def _outline(
    documents: int,
    sections: int,
    blocks: Iterable[tuple[int, Sequence[Section]]],
    max_documents: int,
    max_sections: int,
    max_chars: int,
) -> str:
    """``blocks``: per document, its number of sections and its first ones, read as needed."""
    if not documents:
        return ""
    lines = [f"Corpus: {documents} documents, {sections} sections."]
    used, listed = len(lines[0]), 0
    for total, first in itertools.islice(blocks, max_documents):
        doc = first[0].document
        label = doc.title if doc.title and doc.title != doc.doc_id else doc.doc_id
        if total == 1 and not first[0].path:
            block = [f"- {label}: {_summary(first[0])}"]
        else:
            block = [f"- {label}"]
            block += [f"  - {' > '.join(s.path) or '(introduction)'}: {_summary(s)}" for s in first]
            if total > max_sections:
                block.append(f"  - ... and {total - max_sections} more sections")
        size = sum(len(line) + 1 for line in block)
        if used + size > max_chars - 40:  # room for "... and N more documents"
            break
        lines += block
        used, listed = used + size, listed + 1
    if listed < documents:
        lines.append(f"... and {documents - listed} more documents")
    return "\n".join(lines)


def summarize(text: str, limit: int = SUMMARY_CHARS) -> str:
    """The first sentence of ``text``, markup and whitespace collapsed, at most ``limit`` chars."""
    flat = " ".join(" ".join(_MARKUP.sub("", line) for line in text.splitlines()).split())
    match = _SENTENCE.match(flat)
    sentence = match.group(1) if match else flat
    if len(sentence) <= limit:
        return sentence
    return sentence[: limit - 1].rsplit(" ", 1)[0] + "…"


def _summary(section: Section) -> str:
    return summarize(section.text[section.body_start :]) or summarize(section.text)


OUTLINE_FILE = "corpus_outline.npz"


@dataclass(frozen=True)
class OutlineRows:
    """Per namespace (entries ``offsets[i]:offsets[i + 1]``), its section rows and their document
    ordinals: a scope's outline parses only the sections it lists (all took 6 s at 1M chunks)."""

    namespaces: tuple[str, ...]
    offsets: npt.NDArray[np.int64]
    rows: npt.NDArray[np.int32]
    docs: npt.NDArray[np.int32]

    @classmethod
    def of(cls, sections: RecordTable) -> OutlineRows:
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

    def outline(
        self,
        sections: RecordTable,
        namespaces: Sequence[str] | None,
        filter: Mapping[str, Any] | None,
    ) -> str:
        """The corpus map of the ``sections`` (these rows' table) a turn of this scope may see: the
        filter is tested on the scope's own rows alone.

        Example:
            >>> from ragtiller.index.records import RecordTable
            >>> table = RecordTable(["s1"], ["Setup. Run make."], [{"tenant": "acme"}])
            >>> OutlineRows.of(table).outline(table, ["default"], {"tenant": "globex"})  # no acme
            ''
        """
        rows, docs = self.scope(namespaces)
        if filter:
            passes = predicate(filter)
            metadatas = sections.metadatas
            keep = np.fromiter(
                (passes(metadatas[r]) for r in rows.tolist()), dtype=np.bool_, count=len(rows)
            )
            rows, docs = rows[keep], docs[keep]
        if not len(rows):
            return ""
        by_doc = np.argsort(docs, kind="stable")  # each document's rows, in row order
        _, first, counts = np.unique(docs, return_index=True, return_counts=True)
        starts = np.concatenate([[0], np.cumsum(counts)])
        appearance = np.argsort(first, kind="stable")  # documents in order of first section

        def blocks() -> Iterator[tuple[int, list[Section]]]:
            for d in appearance.tolist():
                mine = rows[by_doc[starts[d] : starts[d] + min(int(counts[d]), _MAX_SECTIONS)]]
                yield (
                    int(counts[d]),
                    [section_from_record(*sections.fields(r)) for r in mine.tolist()],
                )

        return _outline(len(counts), len(rows), blocks(), _MAX_DOCUMENTS, _MAX_SECTIONS, _MAX_CHARS)

    def save(self, path: Path) -> None:
        with path.open("wb") as f:
            np.savez(f, **{**vars(self), "namespaces": np.array(self.namespaces, dtype=np.str_)})

    @classmethod
    def load(cls, path: Path, sections: int) -> OutlineRows:
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
