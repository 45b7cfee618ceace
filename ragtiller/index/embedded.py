"""The embedded index: one ingest door, three tiers, one versioned directory on disk."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from pydantic import ValidationError

from ragtiller.core.tiers import Tier
from ragtiller.errors import IndexStoreError
from ragtiller.index.ann import ANN_FILE, AnnIndex
from ragtiller.index.corpus_map import ScopedOverview
from ragtiller.index.dense import CHUNKS_FILE, VECTORS_FILE, DenseTier, NumpyVectorStore
from ragtiller.index.derived import (
    DERIVED_FILES,
    Derived,
    load_derived,
    load_graph,
    save_derived,
)
from ragtiller.index.lexical import LEXICAL_DIR, LexicalTier
from ragtiller.index.manifest import FORMAT_VERSION, MANIFEST_FILE, IndexManifest
from ragtiller.index.parent_child import PARENTS_FILE, ParentChildTier
from ragtiller.index.records import RecordTable
from ragtiller.index.units import section_from_record
from ragtiller.index.versions import FaultHook, Step, open_current, write_version
from ragtiller.models.batch_embedding import EmbeddingStats
from ragtiller.models.embedders import embedder_identity

if TYPE_CHECKING:
    from ragtiller.ingest.pipeline import IngestReport

CORPUS_MAP_FILE = "corpus_map.txt"
INDEX_FILES = (
    VECTORS_FILE,
    CHUNKS_FILE,
    PARENTS_FILE,
    LEXICAL_DIR,
    *DERIVED_FILES,
    CORPUS_MAP_FILE,
    MANIFEST_FILE,
)
"""What one version directory holds (and ``ann.faiss`` for an index with an HNSW graph, see
:mod:`ragtiller.index.derived`); ``manifest.json`` is written last."""


class SaveProgress(Protocol):
    """A progress bar :meth:`EmbeddedIndex.save` advances per file (ingest's bar is one)."""

    def stage(self, name: str, total: int, *, unit: str = "item") -> None: ...

    def advance(self, n: int = 1) -> None: ...


def _no_fault(step: str) -> None:
    """Every save step proceeds."""


class EmbeddedIndex:
    """An offline, persistent index serving the ``dense``, ``parent_child`` and ``lexical`` tiers.

    Build it with :func:`ragtiller.ingest.build_index` (or :func:`ragtiller.ingest.ingest`, which
    also saves, and re-embeds only what changed), reopen it with :meth:`load`. All three tiers share one chunk table, so a chunk id
    means the same chunk in every tier.

    Hits carry ``doc_id``, ``source`` and ``parent_id``; their ``metadata`` holds ``namespace``,
    ``title`` (None for files), ``section_path`` (heading titles), ``start``/``end`` (character
    offsets of the hit's text in its parent section for a chunk, in its document for a section),
    and the document's own metadata (``status`` and the like). The parent-child tier adds
    ``matched_child_ids``.

    Example:
        >>> from langchain_core.documents import Document
        >>> from ragtiller.models import HashingEmbedder
        >>> from ragtiller.ingest import build_index
        >>> index = build_index(
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
        derived: Derived,
        stats: EmbeddingStats | None = None,
    ) -> None:
        self.store = store
        self.parents = parents
        self.manifest = manifest
        self.corpus_map = corpus_map
        """The outline of the whole index, every namespace and tenant: for operators. A turn
        gets :meth:`overview` of its own scope instead."""
        self.stats = stats or EmbeddingStats()
        self.report: IngestReport | None = None
        """What the ingest that built this object did, set by :mod:`ragtiller.ingest` (None for an
        index opened with :meth:`load`)."""
        self._lexical = lexical
        self._derived = derived
        assert derived.outline is not None, "ingest derives it and every version holds its file"
        self._overview = ScopedOverview(parents, section_from_record, derived.outline)
        if self._derived.ann is not None:
            store.attach_ann(self._derived.ann)
        self._tiers: list[Tier] = [
            DenseTier(store),
            ParentChildTier(store, parents, child_parents=self._derived.parent_rows),
            lexical,
        ]

    @property
    def tiers(self) -> list[Tier]:
        """The ``dense``, ``parent_child`` and ``lexical`` tiers, in that order."""
        return list(self._tiers)

    def overview(self, namespaces: Sequence[str] | None, filter: Mapping[str, Any] | None) -> str:
        """The corpus map of the documents in ``namespaces`` whose metadata equals ``filter``
        (a tenant's, say): exactly what a turn with that scope may search, nothing else."""
        return self._overview.outline(namespaces, filter)

    def ann(self) -> AnnIndex:
        """The HNSW graph of the approximate dense tier: saved with an index of
        :data:`~ragtiller.index.ann.ANN_MIN_ROWS` chunks or more, else built here, once."""
        graph = self._derived.ann
        if graph is None:
            graph = AnnIndex.build(self.store.vectors)
            self._derived = replace(self._derived, ann=graph)
            self.store.attach_ann(graph)
        return graph

    @property
    def embedder(self) -> Embeddings:
        """The embedder for queries; the same model the chunks were embedded with."""
        return self.store.embeddings

    def documents(self) -> list[Document]:
        """Every chunk as a LangChain ``Document`` with its stable id: what
        :func:`~ragtiller.ingest.store_sync.sync_vector_store` writes to another vector store."""
        records = self.store.records
        return [records.document(row) for row in range(len(records))]

    def save(
        self,
        directory: str | os.PathLike[str],
        *,
        fault: FaultHook | None = None,
        progress: SaveProgress | None = None,
    ) -> Path:
        """Write the index as a new version of ``directory`` and make it current.

        The files go into a partial version directory, are fsynced, renamed into place, and
        only then does ``CURRENT`` switch to it (see :mod:`ragtiller.index.versions`). Readers
        opening meanwhile get the old version; a crash leaves the old one or the new one.
        Partial versions left by killed saves are removed.

        Args:
            directory: The index directory (created if needed).
            fault: Called before every file operation; tests raise in it to simulate crashes.
            progress: The ingest's bar, advanced per file written.

        Returns:
            The new version's directory.

        Raises:
            IndexStoreError: ``directory`` exists, is not empty and holds no index (it is never
                overwritten).
        """
        names = (
            INDEX_FILES
            if self._derived.ann is None
            else (*INDEX_FILES[:-1], ANN_FILE, MANIFEST_FILE)
        )
        if progress is not None:
            progress.stage("save", len(names), unit="file")

        def write(version: Path, step: Step) -> None:
            for name in names:
                step(f"write {name}")
                self._write_file(version, name)
                if progress is not None:
                    progress.advance()

        return write_version(Path(directory), write, fault=fault or _no_fault)

    def _write_file(self, version: Path, name: str) -> None:
        if name == VECTORS_FILE:
            np.save(version / VECTORS_FILE, np.ascontiguousarray(self.store.vectors))
        elif name == CHUNKS_FILE:
            self.store.records.dump(version / CHUNKS_FILE)
        elif name == PARENTS_FILE:
            self.parents.dump(version / PARENTS_FILE)
        elif name == LEXICAL_DIR:
            self._lexical.save(version / LEXICAL_DIR)
        elif name in (*DERIVED_FILES, ANN_FILE):
            save_derived(self._derived, version, name)
        elif name == CORPUS_MAP_FILE:
            (version / CORPUS_MAP_FILE).write_text(self.corpus_map, encoding="utf-8")
        else:
            (version / MANIFEST_FILE).write_text(
                self.manifest.model_dump_json(indent=2), encoding="utf-8"
            )

    @classmethod
    def load(cls, directory: str | os.PathLike[str], *, embedder: Embeddings) -> EmbeddedIndex:
        """Open the current version of a saved index; vectors and BM25 arrays are memory-mapped.

        Every vector is checked: NaN or infinite values, or a shape that disagrees with the
        manifest or the chunk table, make the open fail rather than the searches go quiet.
        An open concurrent with a save gets the old version or the new one, never an error.

        Args:
            directory: What :meth:`save` wrote.
            embedder: The embedder the index was built with (same name and dimension).

        Raises:
            IndexStoreError: The directory is missing, incomplete or corrupt (the message names the
                file), or ``embedder`` differs from the manifest's (the message names both).
        """
        return open_current(Path(directory), lambda version: cls._load_version(version, embedder))

    @classmethod
    def _load_version(cls, path: Path, embedder: Embeddings) -> EmbeddedIndex:
        if not path.is_dir():
            raise IndexStoreError(f"no index at {path}: directory not found")
        manifest = read_manifest(path / MANIFEST_FILE)
        name, dimension = embedder_identity(embedder)
        built = manifest.embedder
        if (name, dimension) != (built.name, built.dimension):
            raise IndexStoreError(
                f"index at {path} was built with embedder {built.name!r} (dimension "
                f"{built.dimension}) but is being loaded with {name!r} (dimension {dimension}); "
                "load it with the embedder it was built with, or rebuild it"
            )
        for name_ in INDEX_FILES:
            if not (path / name_).exists():
                raise IndexStoreError(f"index at {path} is incomplete: {name_} is missing")
        graph = load_graph(path, manifest.counts.chunks, built.dimension, manifest.vector_dtype)
        vectors = graph.vectors() if graph is not None else None
        store = NumpyVectorStore.load(
            path,
            embedder,
            vectors=vectors,
            namespaces=manifest.namespaces,
            dtype=manifest.vector_dtype,
        )
        parents = RecordTable.load(path / PARENTS_FILE)
        _check_count(path / CHUNKS_FILE, len(store), manifest.counts.chunks, "chunks")
        _check_count(path / PARENTS_FILE, len(parents), manifest.counts.sections, "sections")
        if len(store) and store.vectors.shape[1] != built.dimension:
            raise IndexStoreError(
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
            derived=load_derived(path, store, parents, graph),
        )


def read_manifest(path: Path) -> IndexManifest:
    """The manifest at ``path``, checked.

    Raises:
        IndexStoreError: Missing, unreadable, of another format version, or invalid.
    """
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as e:
        raise IndexStoreError(
            f"index at {path.parent} is incomplete: {path.name} is missing (an interrupted "
            "save, or not an index directory)"
        ) from e
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise IndexStoreError(f"index file {path} is corrupt: {e}") from e
    if isinstance(raw, dict) and raw.get("format_version") != FORMAT_VERSION:
        raise IndexStoreError(
            f"index file {path} has format_version {raw.get('format_version')!r}; this "
            f"ragtiller reads {FORMAT_VERSION}: rebuild the index"
        )
    try:
        return IndexManifest.model_validate(raw)
    except ValidationError as e:
        problems = "; ".join(
            f"{'.'.join(map(str, err['loc'])) or '(root)'}: {err['msg']}" for err in e.errors()
        )
        raise IndexStoreError(f"index file {path} is corrupt: {problems}") from e


def _check_count(path: Path, found: int, expected: int, what: str) -> None:
    if found != expected:
        raise IndexStoreError(
            f"index file {path} is corrupt: it holds {found} {what}, the manifest says {expected}"
        )
