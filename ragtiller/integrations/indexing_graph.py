"""The indexing graph: one node ingests a folder or documents into a saved index, so a Studio user
can add documents and then ask about them. It reads the server's files for whoever can run it, so
a client names a path only inside the root the operator set: no hidden names, no links out.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Mapping
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Literal, NotRequired

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langgraph.channels.ephemeral_value import EphemeralValue
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from typing_extensions import TypedDict

from ragtiller.errors import ConfigurationError, IndexStoreError, IngestError, InputError
from ragtiller.graph.langgraph_internals import check_input_first
from ragtiller.index import ChunkingConfig, EmbeddedIndex, SourceDocument, embedder_for
from ragtiller.index.embedded import read_manifest
from ragtiller.index.manifest import MANIFEST_FILE
from ragtiller.index.units import DEFAULT_CHUNKING
from ragtiller.index.versions import is_index_directory, open_current
from ragtiller.ingest import SkippedSource, ingest, load_sources
from ragtiller.ingest.sources import JSONL_SUFFIX, SUFFIX_FORMATS
from ragtiller.models import HashingEmbedder

INGESTED_SUFFIXES = (*SUFFIX_FORMATS, JSONL_SUFFIX)
MAX_PATH_CHARS = 1024  # the longest path a client may send (Linux's PATH_MAX is 4096 bytes)

_ingesting = threading.Lock()  # one ingest at a time per process: each builds on the last save


class IndexingInput(TypedDict):
    """What a client sends: ``path`` (relative to the ingest root), ``docs`` or both; ``cleanup``
    ``full`` leaves exactly what this run sent. Each key holds for its run only."""

    path: NotRequired[Annotated[str, EphemeralValue]]
    # Documents, {"page_content", "metadata"} objects or strings; a metadata id names a document
    docs: NotRequired[Annotated[list[Document | dict[str, Any] | str], EphemeralValue]]
    cleanup: NotRequired[Annotated[Literal["incremental", "full"], EphemeralValue]]
    namespace: NotRequired[Annotated[str, EphemeralValue]]  # of documents that name none


class IndexingOutput(TypedDict):
    report: dict[str, Any]  # the ingest report (paths from the root), summary and index counts


class IndexingState(IndexingInput, IndexingOutput):
    pass


INPUT_KEYS = frozenset(IndexingInput.__annotations__)


@dataclasses.dataclass(frozen=True)
class IndexingTarget:
    """Where an indexing graph writes (a new index embedded by ``new_embedder`` when none is
    there) and what it may read (``ingest_root``; None: only ``docs``)."""

    index_dir: Path
    ingest_root: Path | None = None
    new_embedder: Callable[[], Embeddings] = HashingEmbedder
    on_ingested: Callable[[EmbeddedIndex], None] | None = None
    root_name: str = "ingest_root"


def build_indexing_graph(target: IndexingTarget) -> CompiledStateGraph:  # type: ignore[type-arg]
    def run(state: IndexingState) -> dict[str, Any]:
        return {"report": _ingest(target, state)}

    builder = StateGraph(IndexingState, input_schema=IndexingInput, output_schema=IndexingOutput)
    builder.add_node("ingest", run)
    builder.add_edge(START, "ingest")
    builder.add_edge("ingest", END)
    compiled = builder.compile(name="ragtiller_indexer")
    check_input_first(compiled, _check_keys)
    return compiled


def _check_keys(input: Any, thread: Mapping[str, Any]) -> None:
    """Refuse input keys the graph would silently drop (on every path, the server's too)."""
    if not isinstance(input, Mapping):
        raise InputError(f"the indexing graph takes an object, but got {type(input).__name__}")
    unknown = sorted(set(input) - INPUT_KEYS)
    if unknown:
        raise InputError(
            f"unknown input key(s) {', '.join(map(repr, unknown))}; "
            f"accepted: {', '.join(sorted(INPUT_KEYS))}"
        )


def _ingest(target: IndexingTarget, state: IndexingState) -> dict[str, Any]:
    path, docs = state.get("path"), state.get("docs")
    if path is None and not docs:
        raise InputError("nothing to ingest: send 'path' (a folder or file) and/or 'docs'")
    if path is not None and not isinstance(path, str):
        raise InputError(f"path must be a string, but got {type(path).__name__}")
    if docs is not None and not isinstance(docs, list):
        raise InputError(f"docs must be a list, but got {type(docs).__name__}")
    cleanup = state.get("cleanup", "incremental")  # an ingest adds and updates, never empties
    if cleanup not in ("incremental", "full"):
        raise InputError(f"cleanup must be 'incremental' or 'full', but got {cleanup!r}")
    namespace = state.get("namespace")
    if namespace is not None and (not isinstance(namespace, str) or not namespace.strip()):
        raise InputError(f"namespace must be a non-blank string, but got {namespace!r}")
    options: dict[str, Any] = {"namespace": namespace} if namespace else {}
    sources = [_document(i, doc) for i, doc in enumerate(docs or [])]
    skipped: list[SkippedSource] = []
    with _ingesting:
        if path is not None:
            files, skipped = _files(target, path, options)
            sources = files + sources
        embedder, chunking = _index_settings(target)
        try:
            index = ingest(
                sources,
                target.index_dir,
                embedder=embedder,
                chunking=chunking,
                cleanup=cleanup,
                progress=False,
                **options,
            )
        except IndexStoreError as e:
            raise ConfigurationError(f"cannot ingest into the index: {e}") from e
    assert index.report is not None
    report = dataclasses.replace(index.report, skipped=(*skipped, *index.report.skipped))
    if report.changed and target.on_ingested is not None:
        target.on_ingested(index)
    return {
        "summary": report.summary(),
        **dataclasses.asdict(report),
        "skipped": [dataclasses.asdict(s) for s in report.skipped],
        "index": {
            "documents": index.manifest.counts.documents,
            "chunks": index.manifest.counts.chunks,
        },
    }


def _document(position: int, doc: Any) -> Document:
    if isinstance(doc, Document):
        return doc
    if isinstance(doc, str):
        return Document(page_content=doc)
    if isinstance(doc, Mapping) and isinstance(doc.get("page_content"), str):
        extra = sorted(set(doc) - {"page_content", "metadata", "id", "type"})
        metadata = doc.get("metadata") or {}
        if not extra and isinstance(metadata, Mapping):
            return Document(
                page_content=doc["page_content"], metadata=dict(metadata), id=doc.get("id")
            )
    shape = (
        "an object with keys " + ", ".join(map(repr, sorted(map(str, doc))))
        if isinstance(doc, Mapping)
        else type(doc).__name__
    )
    raise InputError(
        f"docs[{position}]: expected a string or an object with a string 'page_content' and "
        f"an object 'metadata' (and nothing else), but got {shape}"
    )


def _files(
    target: IndexingTarget, path: str, options: Mapping[str, Any]
) -> tuple[list[Document], list[SkippedSource]]:
    if target.ingest_root is None:
        raise ConfigurationError(
            f"this indexing graph reads no folders or files: {target.root_name} is not set "
            "(the operator sets it to the one directory clients may ingest from); send 'docs'"
        )
    root = target.ingest_root.resolve()
    if not root.is_dir():
        raise ConfigurationError(f"{target.root_name} is not a directory")
    named = _confined(root, path, target.root_name)
    try:
        read, skipped = load_sources([named], **options)
    except IngestError as e:  # it names the server's paths: name them from the root
        raise IngestError(str(e).replace(f"{root}/", "")) from e
    base = named if named.is_dir() else named.parent
    documents: list[Document] = []
    for source in read:
        document = _relative(root, base, source)
        if document is None:
            skipped.append(SkippedSource(source.source, "links out of the ingest root"))
        else:
            documents.append(document)
    return documents, [_skipped_relative(root, s) for s in skipped]


def _confined(root: Path, path: str, root_name: str) -> Path:
    if len(path) > MAX_PATH_CHARS:
        raise InputError(f"path is {len(path)} characters long; at most {MAX_PATH_CHARS}")
    if "\x00" in path:
        raise InputError(f"path {path!r} holds a NUL character, which no file name can")
    relative = PurePosixPath(path.replace("\\", "/"))
    if relative.is_absolute() or ".." in relative.parts:
        raise InputError(
            f"path {path!r} must be relative to {root_name} and stay inside it (no '..')"
        )
    if any(part.startswith(".") and part != "." for part in relative.parts):
        raise InputError(f"path {path!r} names a hidden file or folder; they are not ingested")
    try:
        named = (root / relative).resolve()
        if not named.is_relative_to(root):
            raise InputError(f"path {path!r} leads out of {root_name} (through a link)")
        if not named.exists():
            raise InputError(f"path {path!r}: no such file or folder in {root_name}")
        if named.is_file() and named.suffix.lower() not in INGESTED_SUFFIXES:
            raise InputError(
                f"path {path!r}: only {', '.join(INGESTED_SUFFIXES)} files are ingested"
            )
        if not (named.is_file() or named.is_dir()):
            raise InputError(f"path {path!r} is not a regular file or a folder")
    except OSError as e:  # a name too long for the file system, say
        raise InputError(f"path {path!r} cannot be opened: {e.strerror or type(e).__name__}") from e
    return named


def _relative(root: Path, base: Path, source: SourceDocument) -> Document | None:
    """``source`` named from the root (one file keeps one id whichever folder was named); None
    for a file that resolves out of it."""
    if source.source == source.doc_id:  # a file: its id and source become its path from the root
        file_path = base / source.source
        if not file_path.resolve().is_relative_to(root):
            return None
        doc_id = source_name = file_path.relative_to(root).as_posix()
    else:  # a BEIR record, "<file relative to base>#<id>": keep the record's own id
        jsonl = base / source.source[: -len(source.doc_id) - 1]
        if not jsonl.resolve().is_relative_to(root):
            return None
        doc_id, source_name = source.doc_id, f"{jsonl.relative_to(root).as_posix()}#{source.doc_id}"
    metadata = {
        **source.metadata,
        "id": doc_id,
        "source": source_name,
        "format": source.format,
        "namespace": source.namespace,
    }
    if source.title:
        metadata["title"] = source.title
    return Document(page_content=source.text, metadata=metadata)


def _skipped_relative(root: Path, skipped: SkippedSource) -> SkippedSource:
    path = Path(skipped.path)
    shown = path.relative_to(root).as_posix() if path.is_relative_to(root) else path.name
    return SkippedSource(shown, skipped.reason)


def _index_settings(target: IndexingTarget) -> tuple[Embeddings, ChunkingConfig]:
    directory = target.index_dir
    if not (directory.is_dir() and is_index_directory(directory)):
        return target.new_embedder(), DEFAULT_CHUNKING
    try:
        manifest = open_current(directory, lambda v: read_manifest(v / MANIFEST_FILE))
        return embedder_for(manifest.embedder), manifest.chunking
    except IndexStoreError as e:
        raise ConfigurationError(f"cannot ingest into the index: {e}") from e
