"""The ingest door's intake: files, directories, BEIR JSONL corpora and LangChain Documents;
document ids are unique per namespace, so no file can replace or delete another's chunks."""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import stat
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.documents import Document

from ragtiller.errors import IngestError
from ragtiller.index.records import DEFAULT_NAMESPACE, ensure_json_metadata, namespace_of
from ragtiller.index.units import SourceDocument, TextFormat
from ragtiller.index.versions import holds_index

logger = logging.getLogger("ragtiller.index")

Source = str | os.PathLike[str] | Document  # a file, a directory (walked) or a Document

SUFFIX_FORMATS: dict[str, TextFormat] = {
    ".md": "markdown",
    ".markdown": "markdown",
    ".rst": "rst",
    ".txt": "text",
}
JSONL_SUFFIX = ".jsonl"
DEFAULT_MAX_FILE_BYTES = 64 * 1024 * 1024
"""Larger files are skipped, not read (a log or a disk image); ``--max-file-mb`` raises it."""
INDEX_SKIP = "a ragtiller index (not ingested)"
RESERVED_KEYS = frozenset({"id", "source", "title", "namespace", "format"})  # Document fields


@dataclass(frozen=True)
class SkippedSource:
    """A path (or part of a file) that ingest did not read, and why (``not UTF-8 text``, ...)."""

    path: str
    reason: str


def load_sources(
    sources: Iterable[Source],
    *,
    namespace: str = DEFAULT_NAMESPACE,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
    on_total: Callable[[int], None] | None = None,
    on_read: Callable[[], None] | None = None,
) -> tuple[list[SourceDocument], list[SkippedSource]]:
    """Read every source, and list what was skipped. A directory is walked never leaving its
    tree (symlinks lead only to regular files inside it); a path named is read through a
    symlink, as ``find -H`` does. A file's id is its path from the directory named."""
    if max_file_bytes < 1:
        raise ValueError(f"max_file_bytes must be > 0, but got {max_file_bytes}")
    skipped: dict[str, SkippedSource] = {}

    def skip(path: Path | str, reason: str) -> None:
        skipped.setdefault(str(path), SkippedSource(str(path), reason))

    entries: list[Document | _File] = []
    for source in sources:
        if isinstance(source, Document):
            entries.append(source)
            continue
        path = Path(source)
        try:
            if path.is_dir():  # a directory named here is walked even through a symlink (find -H)
                entries.extend(_walk(path, skip))
            elif _in_index(path):
                skip(path, INDEX_SKIP)
            elif path.exists() or path.is_symlink():
                entries.append(_File(path, path.parent, None))
            else:
                raise IngestError(f"cannot ingest {path}: no such file or directory")
        except OSError as e:
            raise IngestError(f"cannot ingest {path}: {e.strerror or e}") from e
    if on_total is not None:
        on_total(len(entries))
    documents: list[tuple[SourceDocument, str]] = []
    seen: set[Path] = set()
    for entry in entries:
        if isinstance(entry, Document):
            nul = entry.page_content.find("\x00")
            if nul >= 0:
                md = entry.metadata
                name = str(md.get("source") or md.get("id") or entry.id or "a Document")
                skip(name, f"binary: a NUL character at offset {nul}")
            else:
                documents.append((_from_langchain(entry, namespace), DOCUMENT_ORIGIN))
        elif entry.path not in seen:
            seen.add(entry.path)
            documents.extend(_read_file(entry, namespace, max_file_bytes, skip))
        if on_read is not None:
            on_read()
    check_unique(documents)
    if skipped:
        listing = "; ".join(f"{s.path} ({s.reason})" for s in skipped.values())
        logger.info("skipped %d source(s): %s", len(skipped), listing)
    return [doc for doc, _ in documents], list(skipped.values())


@dataclass(frozen=True)
class _File:
    path: Path
    root: Path
    real: Path | None


def _in_index(path: Path) -> bool:
    try:
        real = path.resolve()
    except RuntimeError:  # a symlink loop, before Python 3.13: opening it says so
        return False
    return any(holds_index(d) for d in (real, *real.parents))


def _walk(root: Path, skip: Callable[[Path, str], None]) -> list[_File]:
    real_root = root.resolve()
    if _in_index(root):
        skip(root, INDEX_SKIP)
        return []

    def unreadable(error: OSError) -> None:
        where = Path(os.fsdecode(error.filename)) if error.filename else root
        skip(where, f"unreadable directory: {error.strerror or error}")

    files: list[_File] = []
    for dirpath, dirnames, filenames in os.walk(root, onerror=unreadable, followlinks=False):
        here = Path(dirpath)
        kept = []
        for name in sorted(d for d in dirnames if not d.startswith(".")):
            try:
                if (here / name).is_symlink():
                    skip(here / name, "symlink to a directory (not followed)")
                elif holds_index(here / name):
                    skip(here / name, INDEX_SKIP)
                else:
                    kept.append(name)
            except OSError as e:
                skip(here / name, f"unreadable directory: {e.strerror or e}")
        dirnames[:] = kept
        for name in sorted(filenames):
            suffix = Path(name).suffix.lower()
            if name.startswith(".") or (suffix not in SUFFIX_FORMATS and suffix != JSONL_SUFFIX):
                continue
            path = here / name
            real: Path | None = real_root / path.relative_to(root)
            try:
                if path.is_symlink():
                    real = _resolved_inside(path, real_root, skip)
            except OSError as e:
                skip(path, f"unreadable: {e.strerror or e}")
                continue
            if real is not None:
                files.append(_File(path, root, real))
    return files


def _resolved_inside(link: Path, real_root: Path, skip: Callable[[Path, str], None]) -> Path | None:
    try:
        target = link.resolve()
    except RuntimeError:  # a symlink loop, before Python 3.13
        skip(link, "symlink loop")
        return None
    except OSError as e:
        skip(link, "symlink loop" if e.errno == errno.ELOOP else f"unreadable: {e.strerror or e}")
        return None
    if not target.is_relative_to(real_root):
        skip(link, "symlink out of the tree (not followed)")
        return None
    if any(holds_index(d) for d in target.parents if d.is_relative_to(real_root)):
        skip(link, "symlink into a ragtiller index (not followed)")
        return None
    return target


def _read_file(
    entry: _File, namespace: str, max_file_bytes: int, skip: Callable[[Path, str], None]
) -> list[tuple[SourceDocument, str]]:
    path = entry.path
    data = _read_regular_file(path, entry.real, max_file_bytes, skip)
    if data is None:
        return []
    nul = data.find(b"\x00")
    if nul >= 0:
        skip(path, f"binary: a NUL byte at offset {nul}")
        return []
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        skip(path, "not UTF-8 text")
        return []
    rel = path.relative_to(entry.root).as_posix()
    if path.suffix.lower() == JSONL_SUFFIX:
        return _read_beir(text, path, rel, namespace, skip)
    fmt = SUFFIX_FORMATS.get(path.suffix.lower(), "text")
    return [(SourceDocument(rel, text, rel, format=fmt, namespace=namespace), str(path))]


def _read_regular_file(
    path: Path, real: Path | None, max_file_bytes: int, skip: Callable[[Path, str], None]
) -> bytes | None:
    """The bytes of a regular file within the cap: opened non-blocking (a FIFO cannot block),
    checked by ``fstat`` (a file swapped after the check is the one checked), and a walked file
    at ``real`` without following a symlink (one swapped in cannot lead out of the tree)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags) if real is None else os.open(real, flags | os.O_NOFOLLOW)
    except FileNotFoundError:
        skip(path, "broken symlink" if path.is_symlink() else "vanished while ingesting")
        return None
    except OSError as e:
        if e.errno == errno.ELOOP:
            skip(path, "symlink loop" if real is None else "became a symlink while ingesting")
        else:
            skip(path, f"unreadable: {e.strerror or e}")
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = next((k for test, k in _KINDS if test(info.st_mode)), "special file")
            via = "symlink to " if path.is_symlink() else ""
            skip(path, f"not a regular file ({via}{kind})")
            return None
        if info.st_size > max_file_bytes:
            skip(path, f"larger than the {_size(max_file_bytes)} cap ({_size(info.st_size)})")
            return None
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(max_file_bytes + 1)
        if len(data) > max_file_bytes:
            skip(path, f"grew past the {_size(max_file_bytes)} cap while being read")
            return None
        return data
    except OSError as e:
        skip(path, f"unreadable: {e.strerror or e}")
        return None
    finally:
        os.close(fd)


_KINDS = (
    (stat.S_ISDIR, "directory"),
    (stat.S_ISFIFO, "FIFO"),
    (stat.S_ISSOCK, "socket"),
    (stat.S_ISCHR, "character device"),
    (stat.S_ISBLK, "block device"),
)


def _size(n: int) -> str:
    return f"{n / 1024 / 1024:.1f} MiB" if n >= 1024 * 1024 else f"{n} bytes"


def _read_beir(
    text: str, path: Path, rel: str, namespace: str, skip: Callable[[Path, str], None]
) -> list[tuple[SourceDocument, str]]:
    # split at "\n" only: JSON allows U+2028 and U+0085 unescaped inside a string
    documents: list[tuple[SourceDocument, str]] = []
    bad: list[int] = []
    nul: list[int] = []
    for lineno, line in enumerate(text.split("\n"), start=1):
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
        body = record.get("text") or ""
        if title and body.strip() in ("", title.strip()):  # the title is the whole text
            body, title = title, None
        if "\x00" in body or (title and "\x00" in title):
            nul.append(lineno)
            continue
        extra = record.get("metadata")
        metadata = extra if isinstance(extra, dict) else {}
        document = SourceDocument(
            doc_id,
            body,
            f"{rel}#{doc_id}",
            title=title,
            namespace=namespace,
            metadata=_checked(metadata, f"BEIR record {doc_id!r} in {path}"),
        )
        documents.append((document, f"{path} line {lineno}"))
    reasons = []
    if bad:
        reasons.append(
            f"{len(bad)} line(s) are not BEIR corpus records with _id and text "
            f"(first: line {bad[0]})"
        )
    if nul:
        reasons.append(f"{len(nul)} record(s) are binary: a NUL character (first: line {nul[0]})")
    if reasons:
        skip(path, "; ".join(reasons))
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


DOCUMENT_ORIGIN = "LangChain Documents"
"""The origin of every ``Document``: Documents sharing an id are passages of one document."""


def check_unique(documents: Iterable[tuple[SourceDocument, str]]) -> None:
    """Refuse a document id that two origins (a file, a BEIR line, Documents) give."""
    first: dict[tuple[str, str], str] = {}
    clashes: list[str] = []
    for doc, origin in documents:
        owner = first.setdefault((doc.namespace, doc.doc_id), origin)
        if owner != origin:
            clashes.append(f"{_named(doc.doc_id, doc.namespace)} by {owner} and by {origin}")
    if clashes:
        raise IngestError(
            f"{len(clashes)} document id(s) are given by more than one source, but ids must be "
            f"unique per namespace: {_first_few(clashes)}; a file's id is its path under the "
            "directory ingested and a BEIR record's is its _id: rename the files or ids, or "
            "ingest them into separate namespaces or indexes"
        )


def check_against_index(
    documents: Iterable[SourceDocument], indexed: Iterable[Mapping[str, Any]]
) -> None:
    """Refuse, incrementally, a BEIR record whose id is indexed from another corpus file."""
    stored: dict[tuple[str, str], str] = {}
    for md in indexed:
        stored.setdefault((namespace_of(md), str(md.get("doc_id"))), str(md.get("source", "")))
    clashes: list[str] = []
    for doc in documents:
        old = stored.get((doc.namespace, doc.doc_id))
        if old is None or old == doc.source:
            continue
        if None not in (_corpus_of(old, doc.doc_id), _corpus_of(doc.source, doc.doc_id)):
            clashes.append(
                f"{_named(doc.doc_id, doc.namespace)} is indexed from {old}, and {doc.source} gives it too"
            )
    if clashes:
        raise IngestError(
            f"{len(clashes)} record id(s) are already indexed from another corpus file, and an "
            f"incremental ingest would replace those records: {_first_few(clashes)}; ids must be "
            "unique per namespace: rename the ids, or ingest every file together with cleanup "
            "'full' (the index then holds exactly those files)"
        )


def _corpus_of(source: str, doc_id: str) -> str | None:
    suffix = f"#{doc_id}"
    return source[: -len(suffix)] if source.endswith(suffix) else None


def _named(doc_id: str, namespace: str) -> str:
    return f"{doc_id!r} (namespace {namespace!r})"


def _first_few(clashes: list[str]) -> str:
    more = len(clashes) - 3
    return "; ".join(clashes[:3]) + (f"; and {more} more" if more > 0 else "")
