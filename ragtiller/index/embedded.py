"""The embedded index: one ingest door, three tiers, one versioned directory on disk."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from pydantic import ValidationError

from ragtiller.core.tiers import Tier
from ragtiller.errors import IndexStoreError
from ragtiller.index import ann
from ragtiller.index.ann import ANN_FILE, AnnIndex, load_graph
from ragtiller.index.compute import SharedScans
from ragtiller.index.corpus_map import OUTLINE_FILE, OutlineRows
from ragtiller.index.dense import CHUNKS_FILE, VECTORS_FILE, NumpyVectorStore
from ragtiller.index.dense_tier import DenseTier
from ragtiller.index.lexical import LEXICAL_DIR, LexicalTier, lexical_text
from ragtiller.index.manifest import FORMAT_VERSION, MANIFEST_FILE, EmbedderInfo, IndexManifest
from ragtiller.index.parent_child import PARENT_ROWS_FILE, ParentChildTier, parent_rows
from ragtiller.index.records import RecordTable
from ragtiller.index.versions import FaultHook, open_current, write_version
from ragtiller.models import EmbeddingStats, HashingEmbedder, MiniLMEmbedder, embed_texts
from ragtiller.models.embedders import embedder_identity, embedder_variant, local_embedder

if TYPE_CHECKING:
    from ragtiller.ingest.pipeline import IngestReport
    from ragtiller.ingest.progress import IngestProgress

PARENTS_FILE, CORPUS_MAP_FILE = "parents.jsonl", "corpus_map.txt"
_ROWS = (VECTORS_FILE, CHUNKS_FILE, PARENTS_FILE, LEXICAL_DIR)  # the chunks, sections and BM25
# what every version holds, the manifest written last (ann.faiss just before it, if any)
INDEX_FILES = (*_ROWS, PARENT_ROWS_FILE, OUTLINE_FILE, CORPUS_MAP_FILE, MANIFEST_FILE)
SCOPES_KEPT = 64  # corpus maps kept per index, one per (namespaces, filter) asked for


@dataclass(frozen=True)
class Derived:
    """What ingest derives from the rows and each version saves, so an open computes nothing."""

    parent_rows: npt.NDArray[np.intp]
    ann: AnnIndex | None
    outline: OutlineRows


def build_derived(store: NumpyVectorStore, parents: RecordTable) -> Derived:
    graph = AnnIndex.build(store.vectors) if len(store) >= ann.ANN_MIN_ROWS else None
    return Derived(parent_rows(store.records, parents), graph, OutlineRows.of(parents))


class EmbeddedIndex:
    """An offline, persistent index serving the ``dense``, ``parent_child`` and ``lexical`` tiers
    over one chunk table (a chunk id means one chunk in every tier); made by ``build_index``."""

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
        self.corpus_map = corpus_map  # of the whole index, for operators: a turn gets overview()
        self.stats = stats or EmbeddingStats()
        self.report: IngestReport | None = None  # what the ingest that built it did
        self._lexical = lexical
        self._derived = derived
        self._overviews = SharedScans(SCOPES_KEPT)
        if derived.ann is not None:
            store.attach_ann(derived.ann)
        self._tiers: list[Tier] = [
            DenseTier(store),
            ParentChildTier(store, parents, child_parents=derived.parent_rows),
            lexical,
        ]

    @property
    def tiers(self) -> list[Tier]:
        """The ``dense``, ``parent_child`` and ``lexical`` tiers, in that order."""
        return list(self._tiers)

    def overview(self, namespaces: Sequence[str] | None, filter: Mapping[str, Any] | None) -> str:
        """The corpus map of exactly what a turn with this scope may search, nothing else."""
        key = (
            None if namespaces is None else tuple(sorted(set(namespaces))),
            tuple(sorted((str(k), repr(v)) for k, v in (filter or {}).items())),
        )
        outline = self._derived.outline
        return self._overviews.get(key, lambda: outline.outline(self.parents, namespaces, filter))

    def ann(self) -> AnnIndex:
        """The HNSW graph of the approximate dense tier: the saved one, else built here, once."""
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
        """Every chunk as a LangChain ``Document`` with its stable id (for another vector store)."""
        records = self.store.records
        return [records.document(row) for row in range(len(records))]

    def save(
        self,
        directory: str | os.PathLike[str],
        *,
        fault: FaultHook | None = None,
        progress: IngestProgress | None = None,
    ) -> Path:
        """Write the index as a new version of ``directory`` and make it current; returns it."""
        derived = self._derived
        files: dict[str, Callable[[Path], object]] = {
            VECTORS_FILE: lambda p: np.save(p, np.ascontiguousarray(self.store.vectors)),
            CHUNKS_FILE: self.store.records.dump,
            PARENTS_FILE: self.parents.dump,
            LEXICAL_DIR: self._lexical.save,
            PARENT_ROWS_FILE: lambda p: np.save(p, derived.parent_rows.astype(np.int64)),
            OUTLINE_FILE: derived.outline.save,
            CORPUS_MAP_FILE: lambda p: p.write_text(self.corpus_map, encoding="utf-8"),
        }
        if derived.ann is not None:
            files[ANN_FILE] = derived.ann.save
        files[MANIFEST_FILE] = lambda p: p.write_text(
            self.manifest.model_dump_json(indent=2), encoding="utf-8"
        )
        if progress is not None:
            progress.stage("save", len(files), unit="file")

        def write(version: Path, step: FaultHook) -> None:
            for name, write_file in files.items():
                step(f"write {name}")
                write_file(version / name)
                if progress is not None:
                    progress.advance()

        return write_version(Path(directory), write, fault=fault)

    @classmethod
    def load(cls, directory: str | os.PathLike[str], *, embedder: Embeddings) -> EmbeddedIndex:
        """Open the current version, memory-mapped; a corrupt file or another embedder fails it."""
        return open_current(Path(directory), lambda version: cls._load_version(version, embedder))

    @classmethod
    def _load_version(cls, path: Path, embedder: Embeddings | None) -> EmbeddedIndex:
        """Open one version with ``embedder``, or (None) the one its manifest names."""
        if not path.is_dir():
            raise IndexStoreError(f"no index at {path}: directory not found")
        manifest = read_manifest(path / MANIFEST_FILE)
        built = manifest.embedder
        embedder = embedder_for(built) if embedder is None else embedder
        name, dimension = embedder_identity(embedder)
        if (name, dimension) != (built.name, built.dimension):
            raise IndexStoreError(
                f"index at {path} was built with embedder {built.name!r} (dimension "
                f"{built.dimension}) but is being loaded with {name!r} (dimension {dimension}); "
                "load it with the embedder it was built with, or rebuild it"
            )
        for file in INDEX_FILES:
            if not (path / file).exists():
                raise IndexStoreError(f"index at {path} is incomplete: {file} is missing")
        graph = load_graph(path, manifest.counts.chunks, built.dimension, manifest.vector_dtype)
        store = NumpyVectorStore.load(
            path,
            embedder,
            vectors=graph.vectors() if graph is not None else None,
            namespaces=manifest.namespaces,
            dtype=manifest.vector_dtype,
        )
        parents = RecordTable.load(path / PARENTS_FILE)
        for file, found, expected, what in (
            (CHUNKS_FILE, len(store), manifest.counts.chunks, "chunks"),
            (PARENTS_FILE, len(parents), manifest.counts.sections, "sections"),
        ):
            if found != expected:
                raise IndexStoreError(
                    f"index file {path / file} is corrupt: it holds {found} {what}, the manifest "
                    f"says {expected}"
                )
        if len(store) and store.vectors.shape[1] != built.dimension:
            raise IndexStoreError(
                f"index file {path / VECTORS_FILE} is corrupt: {store.vectors.shape[1]}-dimensional "
                f"vectors, the manifest says {built.dimension}"
            )
        return cls(
            store=store,
            parents=parents,
            lexical=LexicalTier.load(path / LEXICAL_DIR, store.records, manifest.lexical),
            manifest=manifest,
            corpus_map=(path / CORPUS_MAP_FILE).read_text(encoding="utf-8"),
            derived=Derived(
                load_parent_rows(path / PARENT_ROWS_FILE, len(store), len(parents)),
                graph,
                OutlineRows.load(path / OUTLINE_FILE, len(parents)),
            ),
        )


def load_parent_rows(path: Path, children: int, parents: int) -> npt.NDArray[np.intp]:
    """What ingest saved of :func:`parent_rows`, checked against the tables."""
    try:
        rows = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as e:
        raise IndexStoreError(f"index file {path} is corrupt: {e}") from e
    if (
        rows.ndim != 1
        or rows.dtype.kind != "i"
        or len(rows) != children
        or (len(rows) and (rows.min() < -1 or rows.max() >= parents))
    ):
        raise IndexStoreError(
            f"index file {path} is corrupt: expected {children} parent rows in [-1, {parents}), "
            f"found a {rows.dtype} array of shape {rows.shape}; re-ingest to rebuild it"
        )
    return np.asarray(rows, dtype=np.intp)


def read_manifest(path: Path) -> IndexManifest:
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


_HASHING = re.compile(r"ragtiller/hashing-v1-ngram(?P<weight>\d+(?:\.\d+)?(?:e-?\d+)?)")


def embedder_for(info: EmbedderInfo) -> Embeddings:
    """The embedder a manifest names: bundled MiniLM or the hashing test embedder."""
    if info.name == MiniLMEmbedder.model_name:
        return local_embedder()
    if match := _HASHING.fullmatch(info.name):
        return HashingEmbedder(info.dimension, ngram_weight=float(match["weight"]))
    raise IndexStoreError(
        f"the index was built with embedder {info.name!r}, which the command line cannot "
        "construct; load it in Python with EmbeddedIndex.load(dir, embedder=...)"
    )


def open_index(directory: str | Path) -> EmbeddedIndex:
    """Load the index in ``directory`` with the embedder recorded in its manifest."""
    return open_current(Path(directory), lambda version: EmbeddedIndex._load_version(version, None))


MIN_AGREEMENT = 0.99  # mean cosine another variant (MiniLM's ONNX, torch) must reach to keep it


def vector_agreement(index: EmbeddedIndex, embedder: Embeddings, *, sample: int = 64) -> float:
    """Mean cosine between stored vectors and ``embedder``'s, over up to ``sample`` chunks."""
    store = index.store
    if len(store) == 0:
        return 1.0
    rows = np.unique(np.linspace(0, len(store) - 1, num=min(sample, len(store)), dtype=np.int64))
    records = store.records
    texts = [lexical_text(records.texts[r], records.metadatas[r].get("title")) for r in rows]
    fresh = embed_texts(embedder, texts, progress=False)
    return float((fresh * store.vectors[rows]).sum(axis=1).mean())


def variant_rebuild_reason(index: EmbeddedIndex, embedder: Embeddings) -> str | None:
    """Why ``index`` must be rebuilt for ``embedder``'s variant (re-embedding a sample), or None."""
    built, now = index.manifest.embedder_variant, embedder_variant(embedder)
    if now is None or built == now:
        return None
    agreement = vector_agreement(index, embedder)
    if agreement >= MIN_AGREEMENT:
        return None
    return (
        f"embedder variant changed from {built or 'unrecorded'} to {now} and the vectors agree "
        f"to a mean cosine of {agreement:.3f} (< {MIN_AGREEMENT})"
    )
