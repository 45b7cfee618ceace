"""What an index derives from its chunks and sections, built at ingest and saved with the version.

Opening an index must not rebuild anything: at 100k chunks the section BM25 alone took most of
a minute when it was built on first use. So ingest builds, and each version holds:

* ``section_lexical/``: BM25 over the parent sections (title + text), for
  ``fusion.lexical_unit: section``;
* ``parent_rows.npy``: the parent row of each child row, for the parent-child tier;
* ``ann.faiss``: the HNSW graph of the approximate dense tier, for indexes of
  :data:`~ragtiller.index.ann.ANN_MIN_ROWS` chunks or more;
* ``corpus_outline.npz``: per namespace, its section rows and their documents, so that a broad
  turn's corpus map parses only the sections it lists (:class:`~ragtiller.index.corpus_map.OutlineRows`);
* ``document_keys.npz``: each chunk's document, coded, so that Rocchio's fused first pass reads
  its rows' documents without parsing them (:class:`~ragtiller.index.document_keys.DocumentKeys`).

A version saved before these existed opens all the same; what it lacks is built on first use.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from ragtiller.errors import IndexStoreError
from ragtiller.index import ann
from ragtiller.index.ann import ANN_FILE, AnnIndex
from ragtiller.index.corpus_map import OUTLINE_FILE, OutlineRows
from ragtiller.index.dense import NumpyVectorStore
from ragtiller.index.document_keys import DOCUMENT_KEYS_FILE, DocumentKeys
from ragtiller.index.lexical import LexicalConfig, LexicalTier, lexical_text
from ragtiller.index.manifest import VectorDtype
from ragtiller.index.parent_child import PARENT_ROWS_FILE, parent_rows
from ragtiller.index.records import RecordTable

SECTION_LEXICAL_DIR = "section_lexical"
SECTION_UNIT = "section"
"""``metadata["unit"]`` of section hits (``ragtiller.ranking.documents.SECTION_UNIT``)."""
DERIVED_FILES = (SECTION_LEXICAL_DIR, PARENT_ROWS_FILE, OUTLINE_FILE, DOCUMENT_KEYS_FILE)
"""Written into every version; ``ann.faiss`` only where the index has a graph."""


@dataclass(frozen=True)
class Derived:
    """The structures derived from one index's rows; None where a version lacks one."""

    section_lexical: LexicalTier | None = None
    parent_rows: npt.NDArray[np.intp] | None = None
    ann: AnnIndex | None = None
    outline: OutlineRows | None = None
    document_keys: DocumentKeys | None = None


def section_lexical(parents: RecordTable, config: LexicalConfig) -> LexicalTier:
    """BM25 over the parent sections, each indexed as its title, a space and its text."""
    texts = [
        lexical_text(text, md.get("title"))
        for text, md in zip(parents.texts, parents.metadatas, strict=True)
    ]
    return LexicalTier.build(parents, texts, config, unit=SECTION_UNIT)


def build_derived(
    store: NumpyVectorStore,
    parents: RecordTable,
    config: LexicalConfig,
    *,
    ann_min_rows: int | None = None,
) -> Derived:
    """Everything an ingest derives; the HNSW graph only from ``ann_min_rows`` chunks up
    (default :data:`~ragtiller.index.ann.ANN_MIN_ROWS`)."""
    least = ann.ANN_MIN_ROWS if ann_min_rows is None else ann_min_rows
    graph = AnnIndex.build(store.vectors) if len(store) >= least else None
    return Derived(
        section_lexical(parents, config),
        parent_rows(store.records, parents),
        graph,
        OutlineRows.of(parents),
        store.records.document_keys(),
    )


def save_derived(derived: Derived, version: Path, name: str) -> None:
    """Write the derived file ``name`` (one of :data:`DERIVED_FILES` or ``ann.faiss``)."""
    if name == SECTION_LEXICAL_DIR:
        assert derived.section_lexical is not None
        derived.section_lexical.save(version / SECTION_LEXICAL_DIR)
    elif name == PARENT_ROWS_FILE:
        assert derived.parent_rows is not None
        np.save(version / PARENT_ROWS_FILE, derived.parent_rows.astype(np.int64))
    elif name == ANN_FILE:
        assert derived.ann is not None
        derived.ann.save(version / ANN_FILE)
    elif name == OUTLINE_FILE:
        assert derived.outline is not None
        derived.outline.save(version / OUTLINE_FILE)
    elif name == DOCUMENT_KEYS_FILE:
        assert derived.document_keys is not None
        derived.document_keys.save(version / DOCUMENT_KEYS_FILE)
    else:  # pragma: no cover - a programming error
        raise ValueError(f"not a derived file: {name}")


def load_graph(
    version: Path, rows: int, dimension: int, dtype: VectorDtype = "float32"
) -> AnnIndex | None:
    """The HNSW graph ``version`` holds for ``rows`` vectors, or None (see :meth:`AnnIndex.load`).

    Opened before the vectors: its own copy of them is the one the store searches.
    """
    if not rows or not (version / ANN_FILE).is_file():
        return None
    return AnnIndex.load(version / ANN_FILE, rows=rows, dimension=dimension, dtype=dtype)


def load_derived(
    version: Path,
    store: NumpyVectorStore,
    parents: RecordTable,
    config: LexicalConfig,
    graph: AnnIndex | None = None,
) -> Derived:
    """What ``version`` holds of the derived structures, checked against its rows (``graph``
    from :func:`load_graph`).

    Raises:
        IndexStoreError: A derived file is unreadable or disagrees with the chunks or sections.
    """
    lexical: LexicalTier | None = None
    if (version / SECTION_LEXICAL_DIR).is_dir():
        lexical = LexicalTier.load(
            version / SECTION_LEXICAL_DIR, parents, config, unit=SECTION_UNIT
        )
    rows: npt.NDArray[np.intp] | None = None
    if (version / PARENT_ROWS_FILE).is_file():
        rows = _parent_rows(version / PARENT_ROWS_FILE, len(store), len(parents))
    outline: OutlineRows | None = None
    if (version / OUTLINE_FILE).is_file():
        outline = OutlineRows.load(version / OUTLINE_FILE, len(parents))
    documents: DocumentKeys | None = None
    if (version / DOCUMENT_KEYS_FILE).is_file():
        documents = DocumentKeys.load(version / DOCUMENT_KEYS_FILE, len(store))
    return Derived(lexical, rows, graph, outline, documents)


def _parent_rows(path: Path, children: int, parents: int) -> npt.NDArray[np.intp]:
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
    checked: npt.NDArray[np.intp] = rows.astype(np.intp)
    return checked
