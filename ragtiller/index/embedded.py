"""The embedded index: one ingest door, three tiers, one directory on disk."""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from langchain_core.embeddings import Embeddings
from pydantic import ValidationError

from ragtiller._retry import RetryPolicy
from ragtiller.errors import IndexError_, IngestError
from ragtiller.index._embedding import DEFAULT_RETRY, EmbeddingStats, embed_texts
from ragtiller.index._records import RecordTable
from ragtiller.index.chunking import (
    DEFAULT_CHUNKING,
    Chunk,
    ChunkingConfig,
    Section,
    chunk_documents,
)
from ragtiller.index.corpus_map import build_corpus_map
from ragtiller.index.dense import CHUNKS_FILE, VECTORS_FILE, DenseTier, NumpyVectorStore
from ragtiller.index.embedders import embedder_identity, embedder_name, embedder_variant
from ragtiller.index.lexical import DEFAULT_LEXICAL, LEXICAL_DIR, LexicalConfig, LexicalTier
from ragtiller.index.manifest import (
    FORMAT_VERSION,
    MANIFEST_FILE,
    EmbedderInfo,
    IndexCounts,
    IndexManifest,
)
from ragtiller.index.parent_child import PARENTS_FILE, ParentChildTier
from ragtiller.index.sources import SkippedSource, Source, load_sources
from ragtiller.types import Tier

CORPUS_MAP_FILE = "corpus_map.txt"


class EmbeddedIndex:
    """An offline, persistent index serving the ``dense``, ``parent_child`` and ``lexical`` tiers.

    Build it with :meth:`build` (or :func:`ingest`, which also saves), reopen it with
    :meth:`load`. All three tiers share one chunk table, so a chunk id means the same chunk in
    every tier.

    Hits carry ``doc_id``, ``source`` and ``parent_id``; their ``metadata`` holds ``namespace``,
    ``title`` (None for files), ``section_path`` (heading titles), ``start``/``end`` (character
    offsets of the hit's text in its parent section for a chunk, in its document for a section),
    and the document's own metadata (``status`` and the like). The parent-child tier adds
    ``matched_child_ids``.

    Example:
        >>> from langchain_core.documents import Document
        >>> from ragtiller.index import HashingEmbedder
        >>> index = EmbeddedIndex.build(
        ...     [Document(page_content="# Setup\\n\\nRun make.", metadata={"source": "a.md"})],
        ...     embedder=HashingEmbedder(), progress=False,
        ... )
        >>> [tier.name for tier in index.tiers]
        ['dense', 'parent_child', 'lexical']
    """

    def __init__(
        self,
        *,
        store: NumpyVectorStore,
        parents: RecordTable,
        lexical: LexicalTier,
        manifest: IndexManifest,
        corpus_map: str,
        stats: EmbeddingStats | None = None,
        skipped: Sequence[SkippedSource] = (),
    ) -> None:
        self.store = store
        self.parents = parents
        self.manifest = manifest
        self.corpus_map = corpus_map
        self.stats = stats or EmbeddingStats()
        self.skipped = tuple(skipped)
        self._lexical = lexical
        self._tiers: list[Tier] = [DenseTier(store), ParentChildTier(store, parents), lexical]

    @property
    def tiers(self) -> list[Tier]:
        """The ``dense``, ``parent_child`` and ``lexical`` tiers, in that order."""
        return list(self._tiers)

    @property
    def embedder(self) -> Embeddings:
        """The embedder for queries; the same model the chunks were embedded with."""
        return self.store.embeddings

    @classmethod
    def build(
        cls,
        sources: Iterable[Source],
        *,
        embedder: Embeddings,
        chunking: ChunkingConfig = DEFAULT_CHUNKING,
        lexical: LexicalConfig = DEFAULT_LEXICAL,
        namespace: str = "default",
        progress: bool = True,
        batch_size: int = 64,
        retry: RetryPolicy = DEFAULT_RETRY,
    ) -> EmbeddedIndex:
        """Read, chunk, embed and index ``sources``.

        Args:
            sources: Files, directories and/or LangChain ``Document``s.
            embedder: Any LangChain ``Embeddings``; its name and dimension go in the manifest.
            chunking: Child chunk size and overlap.
            lexical: BM25 parameters.
            namespace: Namespace of documents whose metadata names none.
            progress: Show a progress bar while embedding (only for more than one batch).
            batch_size: Chunks per embedding call.
            retry: Attempts and backoff per embedding call.

        Returns:
            The index, not yet saved.

        Raises:
            IngestError: Nothing readable to ingest (the message lists what was skipped), or
                a path does not exist.
            EmbeddingError: The embedder kept failing on a batch.
        """
        documents, skipped = load_sources(sources, namespace=namespace)
        sections, chunks = chunk_documents(documents, chunking)
        if not chunks:
            detail = "; ".join(f"{s.path} ({s.reason})" for s in skipped)
            raise IngestError(
                f"nothing to ingest: {len(documents)} document(s) read, none with text; "
                f"{len(skipped)} source(s) skipped"
                + (f": {detail}" if detail else "")
                + "; pass Markdown, reStructuredText, text or BEIR .jsonl files, or Documents"
            )
        stats = EmbeddingStats()
        vectors = embed_texts(
            embedder,
            [_indexed_text(c) for c in chunks],
            batch_size=batch_size,
            retry=retry,
            stats=stats,
            progress=progress,
        )
        children = [_chunk_metadata(c) for c in chunks]
        store = NumpyVectorStore.from_vectors(
            [c.text for c in chunks], vectors, embedder, children, ids=[c.id for c in chunks]
        )
        parents = RecordTable(
            [s.id for s in sections],
            [s.text for s in sections],
            [_section_metadata(s) for s in sections],
        )
        lexical_tier = LexicalTier.build(store.records, [_indexed_text(c) for c in chunks], lexical)
        manifest = IndexManifest(
            embedder=EmbedderInfo(name=embedder_name(embedder), dimension=vectors.shape[1]),
            chunking=chunking,
            lexical=lexical,
            counts=IndexCounts(
                documents=len(documents), sections=len(sections), chunks=len(chunks)
            ),
            namespaces=store.records.namespaces,
            embedder_variant=embedder_variant(embedder),
        )
        return cls(
            store=store,
            parents=parents,
            lexical=lexical_tier,
            manifest=manifest,
            corpus_map=build_corpus_map(sections),
            stats=stats,
            skipped=skipped,
        )

    def save(self, directory: str | os.PathLike[str]) -> Path:
        """Write the index into ``directory``, replacing an index already there.

        Files are written into a sibling temporary directory, ``manifest.json`` last, then
        swapped in, so a crash never leaves a half-written index under ``directory``.

        Returns:
            The directory.

        Raises:
            IndexError_: ``directory`` exists, is not empty and holds no index (it is never
                overwritten).
        """
        target = Path(directory)
        if target.exists() and any(target.iterdir()) and not (target / MANIFEST_FILE).is_file():
            raise IndexError_(
                f"refusing to save into {target}: it is not empty and holds no {MANIFEST_FILE}; "
                "choose an empty or new directory"
            )
        staging = target.with_name(f".{target.name}.saving-{os.getpid()}-{time.monotonic_ns()}")
        staging.mkdir(parents=True)
        try:
            self.store.save(staging)
            self.parents.dump(staging / PARENTS_FILE)
            self._lexical.save(staging / LEXICAL_DIR)
            (staging / CORPUS_MAP_FILE).write_text(self.corpus_map, encoding="utf-8")
            (staging / MANIFEST_FILE).write_text(
                self.manifest.model_dump_json(indent=2), encoding="utf-8"
            )
            old = target.with_name(f".{target.name}.old-{os.getpid()}-{time.monotonic_ns()}")
            if target.exists():
                target.rename(old)
            staging.rename(target)
            shutil.rmtree(old, ignore_errors=True)
        finally:
            if staging.exists():
                shutil.rmtree(staging)
        return target

    @classmethod
    def load(cls, directory: str | os.PathLike[str], *, embedder: Embeddings) -> EmbeddedIndex:
        """Open a saved index; vectors and BM25 arrays are memory-mapped, not read.

        Args:
            directory: What :meth:`save` wrote.
            embedder: The embedder the index was built with (same name and dimension).

        Raises:
            IndexError_: The directory is missing, incomplete or corrupt (the message names the
                file), or ``embedder`` differs from the manifest's (the message names both).
        """
        path = Path(directory)
        if not path.is_dir():
            raise IndexError_(f"no index at {path}: directory not found")
        manifest = _read_manifest(path / MANIFEST_FILE)
        name, dimension = embedder_identity(embedder)
        built = manifest.embedder
        if (name, dimension) != (built.name, built.dimension):
            raise IndexError_(
                f"index at {path} was built with embedder {built.name!r} (dimension "
                f"{built.dimension}) but is being loaded with {name!r} (dimension {dimension}); "
                "load it with the embedder it was built with, or rebuild it"
            )
        for name_ in (CHUNKS_FILE, VECTORS_FILE, PARENTS_FILE, CORPUS_MAP_FILE):
            if not (path / name_).is_file():
                raise IndexError_(f"index at {path} is incomplete: {name_} is missing")
        store = NumpyVectorStore.load(path, embedder)
        parents = RecordTable.load(path / PARENTS_FILE)
        _check_count(path / CHUNKS_FILE, len(store), manifest.counts.chunks, "chunks")
        _check_count(path / PARENTS_FILE, len(parents), manifest.counts.sections, "sections")
        if store.vectors.shape[1] != built.dimension:
            raise IndexError_(
                f"index file {path / VECTORS_FILE} is corrupt: {store.vectors.shape[1]}-dimensional "
                f"vectors, the manifest says {built.dimension}"
            )
        lexical = LexicalTier.load(path / LEXICAL_DIR, store.records, manifest.lexical)
        return cls(
            store=store,
            parents=parents,
            lexical=lexical,
            manifest=manifest,
            corpus_map=(path / CORPUS_MAP_FILE).read_text(encoding="utf-8"),
        )


def ingest(
    sources: Iterable[Source],
    index_dir: str | os.PathLike[str],
    *,
    embedder: Embeddings,
    **options: Any,
) -> EmbeddedIndex:
    """Build an index from ``sources`` and save it to ``index_dir``: the one ingest door.

    Args:
        sources: Files, directories and/or LangChain ``Document``s.
        index_dir: Where to save (replaces an index already there).
        embedder: Any LangChain ``Embeddings``.
        **options: Passed to :meth:`EmbeddedIndex.build` (``chunking``, ``lexical``,
            ``namespace``, ``progress``, ``batch_size``, ``retry``).

    Returns:
        The built index.
    """
    index = EmbeddedIndex.build(sources, embedder=embedder, **options)
    index.save(index_dir)
    return index


def _indexed_text(chunk: Chunk) -> str:
    title = chunk.section.document.title
    return f"{title} {chunk.text}" if title else chunk.text


def _section_metadata(section: Section) -> dict[str, Any]:
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


def _chunk_metadata(chunk: Chunk) -> dict[str, Any]:
    return {
        **_section_metadata(chunk.section),
        "parent_id": chunk.section.id,
        "start": chunk.start,
        "end": chunk.end,
    }


def _read_manifest(path: Path) -> IndexManifest:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as e:
        raise IndexError_(
            f"index at {path.parent} is incomplete: {path.name} is missing (an interrupted "
            "save, or not an index directory)"
        ) from e
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise IndexError_(f"index file {path} is corrupt: {e}") from e
    if isinstance(raw, dict) and raw.get("format_version") != FORMAT_VERSION:
        raise IndexError_(
            f"index file {path} has format_version {raw.get('format_version')!r}; this "
            f"ragtiller reads {FORMAT_VERSION}: rebuild the index"
        )
    try:
        return IndexManifest.model_validate(raw)
    except ValidationError as e:
        problems = "; ".join(
            f"{'.'.join(map(str, err['loc'])) or '(root)'}: {err['msg']}" for err in e.errors()
        )
        raise IndexError_(f"index file {path} is corrupt: {problems}") from e


def _check_count(path: Path, found: int, expected: int, what: str) -> None:
    if found != expected:
        raise IndexError_(
            f"index file {path} is corrupt: it holds {found} {what}, the manifest says {expected}"
        )
