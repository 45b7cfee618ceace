"""What an index derives from its chunks and sections, built at ingest and saved with the version.

Opening an index must not rebuild anything, so ingest builds, and each version holds:

* ``parent_rows.npy``: the parent row of each child row, for the parent-child tier;
* ``ann.faiss``: the HNSW graph of the approximate dense tier, for indexes of
  :data:`~ragtiller.index.ann.ANN_MIN_ROWS` chunks or more;
* ``corpus_outline.npz``: per namespace, its section rows and their documents, so that a broad
  turn's corpus map parses only the sections it lists (:class:`~ragtiller.index.corpus_map.OutlineRows`).

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
from ragtiller.index.manifest import VectorDtype
from ragtiller.index.parent_child import PARENT_ROWS_FILE, parent_rows
from ragtiller.index.records import RecordTable

DERIVED_FILES = (PARENT_ROWS_FILE, OUTLINE_FILE)
"""Written into every version; ``ann.faiss`` only where the index has a graph."""


@dataclass(frozen=True)
class Derived:
    """The structures derived from one index's rows; None where a version lacks one."""

    parent_rows: npt.NDArray[np.intp] | None = None
    ann: AnnIndex | None = None
    outline: OutlineRows | None = None


def build_derived(
    store: NumpyVectorStore,
    parents: RecordTable,
    *,
    ann_min_rows: int | None = None,
) -> Derived:
    """Everything an ingest derives; the HNSW graph only from ``ann_min_rows`` chunks up
    (default :data:`~ragtiller.index.ann.ANN_MIN_ROWS`)."""
    least = ann.ANN_MIN_ROWS if ann_min_rows is None else ann_min_rows
    graph = AnnIndex.build(store.vectors) if len(store) >= least else None
    return Derived(parent_rows(store.records, parents), graph, OutlineRows.of(parents))


def save_derived(derived: Derived, version: Path, name: str) -> None:
    """Write the derived file ``name`` (one of :data:`DERIVED_FILES` or ``ann.faiss``)."""
    if name == PARENT_ROWS_FILE:
        assert derived.parent_rows is not None
        np.save(version / PARENT_ROWS_FILE, derived.parent_rows.astype(np.int64))
    elif name == ANN_FILE:
        assert derived.ann is not None
        derived.ann.save(version / ANN_FILE)
    elif name == OUTLINE_FILE:
        assert derived.outline is not None
        derived.outline.save(version / OUTLINE_FILE)
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
    graph: AnnIndex | None = None,
) -> Derived:
    """What ``version`` holds of the derived structures, checked against its rows (``graph``
    from :func:`load_graph`).

    Raises:
        IndexStoreError: A derived file is unreadable or disagrees with the chunks or sections.
    """
    rows: npt.NDArray[np.intp] | None = None
    if (version / PARENT_ROWS_FILE).is_file():
        rows = _parent_rows(version / PARENT_ROWS_FILE, len(store), len(parents))
    outline: OutlineRows | None = None
    if (version / OUTLINE_FILE).is_file():
        outline = OutlineRows.load(version / OUTLINE_FILE, len(parents))
    return Derived(rows, graph, outline)


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
