"""The ingest door's intake: files, directories, BEIR JSONL corpora and LangChain Documents."""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from langchain_core.documents import Document

from ragtiller.errors import IngestError
from ragtiller.index._records import DEFAULT_NAMESPACE, ensure_json_metadata

logger = logging.getLogger("ragtiller.index")

TextFormat = Literal["markdown", "rst", "text"]
Source = str | os.PathLike[str] | Document
"""One ingest source: a file, a directory (read recursively) or a LangChain ``Document``."""

SUFFIX_FORMATS: dict[str, TextFormat] = {
    ".md": "markdown",
    ".markdown": "markdown",
    ".rst": "rst",
    ".txt": "text",
}
JSONL_SUFFIX = ".jsonl"
RESERVED_KEYS = frozenset({"id", "source", "title", "namespace", "format"})
"""Document metadata keys that ingest reads into :class:`SourceDocument` fields."""


@dataclass(frozen=True)
class SourceDocument:
    """One document ready for chunking.

    Attributes:
        doc_id: The BEIR ``_id``, the path relative to the ingest root, or the ``Document``'s
            ``id``/``source`` metadata (a content hash when it has neither).
        text: The full text.
        source: Where it came from (a file path, ``corpus.jsonl#<_id>``, a URL).
        title: A title to put before each chunk's indexed text (BEIR title), if any.
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


@dataclass(frozen=True)
class SkippedSource:
    """A file (or part of one) that ingest could not read.

    Attributes:
        path: The file path.
        reason: Why it was skipped (``binary``, ``not UTF-8 text``, ``unreadable: ...``).
    """

    path: str
    reason: str


def load_sources(
    sources: Iterable[Source], *, namespace: str = DEFAULT_NAMESPACE
) -> tuple[list[SourceDocument], list[SkippedSource]]:
    """Read every source into :class:`SourceDocument`s.

    Directories are walked recursively in sorted order, skipping hidden entries and keeping
    ``.md``, ``.markdown``, ``.rst``, ``.txt`` and ``.jsonl`` files. A file named explicitly is
    read whatever its suffix (unknown suffixes as plain text). ``.jsonl`` files are read as BEIR
    corpora: one ``{"_id", "title", "text"}`` object per line. Binary, undecodable and unreadable
    files are skipped and reported in ONE warning on the ``ragtiller.index`` logger.

    Args:
        sources: Paths and/or LangChain ``Document``s.
        namespace: Namespace for documents that do not name one in their metadata.

    Returns:
        The documents, and the files that were skipped.

    Raises:
        IngestError: A path does not exist, or a ``Document``'s metadata is not JSON-serialisable.
    """
    documents: list[SourceDocument] = []
    skipped: list[SkippedSource] = []
    for source in sources:
        if isinstance(source, Document):
            documents.append(_from_langchain(source, namespace))
            continue
        path = Path(source)
        if path.is_dir():
            for file in _walk(path):
                documents.extend(_read_file(file, path, namespace, skipped))
        elif path.exists():
            documents.extend(_read_file(path, path.parent, namespace, skipped))
        else:
            raise IngestError(f"cannot ingest {path}: no such file or directory")
    if skipped:
        listing = "; ".join(f"{s.path} ({s.reason})" for s in skipped)
        logger.warning("skipped %d unreadable source(s): %s", len(skipped), listing)
    return documents, skipped


def _walk(root: Path) -> list[Path]:
    files: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            suffix = Path(name).suffix.lower()
            if not name.startswith(".") and (suffix in SUFFIX_FORMATS or suffix == JSONL_SUFFIX):
                files.append(Path(dirpath) / name)
    return files


def _read_file(
    path: Path, root: Path, namespace: str, skipped: list[SkippedSource]
) -> list[SourceDocument]:
    text = _read_text(path, skipped)
    if text is None:
        return []
    rel = path.relative_to(root).as_posix()
    if path.suffix.lower() == JSONL_SUFFIX:
        return _read_beir(text, path, rel, namespace, skipped)
    fmt = SUFFIX_FORMATS.get(path.suffix.lower(), "text")
    return [SourceDocument(rel, text, str(path), format=fmt, namespace=namespace)]


def _read_text(path: Path, skipped: list[SkippedSource]) -> str | None:
    try:
        data = path.read_bytes()
    except OSError as e:
        skipped.append(SkippedSource(str(path), f"unreadable: {e.strerror or e}"))
        return None
    if b"\x00" in data[:8192]:
        skipped.append(SkippedSource(str(path), "binary"))
        return None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        skipped.append(SkippedSource(str(path), "not UTF-8 text"))
        return None


def _read_beir(
    text: str, path: Path, rel: str, namespace: str, skipped: list[SkippedSource]
) -> list[SourceDocument]:
    documents: list[SourceDocument] = []
    bad: list[int] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            record = None
        if (
            not isinstance(record, dict)
            or not isinstance(record.get("_id"), str | int)
            or not isinstance(record.get("text", ""), str)
            or not isinstance(record.get("title", ""), str)
        ):
            bad.append(lineno)
            continue
        doc_id = str(record["_id"])
        title = record.get("title") or None
        body = record.get("text") or title or ""
        extra = record.get("metadata")
        metadata = extra if isinstance(extra, dict) else {}
        documents.append(
            SourceDocument(
                doc_id,
                body,
                f"{rel}#{doc_id}",
                title=title,
                namespace=namespace,
                metadata=_checked(metadata, f"BEIR record {doc_id!r} in {path}"),
            )
        )
    if bad:
        skipped.append(
            SkippedSource(
                str(path),
                f"{len(bad)} line(s) are not BEIR corpus records with _id and text "
                f"(first: line {bad[0]})",
            )
        )
    return documents


def _from_langchain(doc: Document, namespace: str) -> SourceDocument:
    md = doc.metadata
    doc_id = str(
        md.get("id")
        or doc.id
        or md.get("source")
        or "doc-" + hashlib.sha256(doc.page_content.encode("utf-8")).hexdigest()[:12]
    )
    source = str(md.get("source") or doc_id)
    fmt = md.get("format") or SUFFIX_FORMATS.get(Path(source).suffix.lower(), "text")
    if fmt not in ("markdown", "rst", "text"):
        raise IngestError(
            f"document {doc_id!r}: metadata format must be one of 'markdown', 'rst', 'text', "
            f"but got {fmt!r}"
        )
    extra = {k: v for k, v in md.items() if k not in RESERVED_KEYS}
    return SourceDocument(
        doc_id,
        doc.page_content,
        source,
        title=str(md["title"]) if md.get("title") else None,
        format=fmt,
        namespace=str(md.get("namespace") or namespace),
        metadata=_checked(extra, f"document {doc_id!r}"),
    )


def _checked(metadata: Mapping[str, Any], owner: str) -> dict[str, Any]:
    try:
        return ensure_json_metadata(metadata, owner=owner)
    except ValueError as e:
        raise IngestError(str(e)) from e
