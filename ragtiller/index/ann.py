"""Approximate dense search: an HNSW graph (faiss) over the store's vectors, filters kept exact.

An exact scan costs O(rows) per query: 15 ms at 100k chunks and 150 ms at 1M on one core.
HNSW answers in well under a millisecond at the same sizes with recall@10 >= 0.98 against the
exact scan (``benchmarks/README.md``, "Scaling"). faiss was chosen among
faiss-cpu, hnswlib and usearch for its build speed, query speed and wheels.

The graph is built at ingest for indexes of :data:`ANN_MIN_ROWS` rows or more and saved beside
the vectors (:data:`ANN_FILE`); it is opened memory-mapped, so server processes share it.
A float16 index (``ingest --vector-dtype float16``) gets faiss' ``IndexHNSWSQ`` with
``QT_fp16``: the graph stores the same float16 rows as ``vectors.npy`` (half the memory) and
scores them in float32; recall@10 .9995 against 1.000 for ``IndexHNSWFlat`` at 50k vectors,
and it builds and searches a little faster. Namespace and metadata filters stay exact: the search only visits rows the filter allows
(faiss' ``IDSelectorBitmap``), every returned row is checked against the filter again, and a
scope the graph cannot fill (a small tenant, a narrow filter) is scanned exactly instead.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import faiss
import numpy as np
import numpy.typing as npt

from ragtiller.errors import IndexStoreError
from ragtiller.index.compute import top_k
from ragtiller.index.manifest import VectorDtype
from ragtiller.models.batch_embedding import Matrix

ANN_FILE = "ann.faiss"
ANN_MIN_ROWS = 50_000
"""Smallest index that gets (and, under ``search: auto``, searches) an HNSW graph. Below it an
exact scan costs under ~6 ms of CPU and returns the true top k; measured in
``benchmarks/bench_ann.py``."""
HNSW_M = 32
"""Neighbours per node (faiss' ``M``): 32 gave recall@10 .992 at ef 64 on 100k vectors, 16 gave .988."""
EF_CONSTRUCTION = 100
"""Candidates kept while building: at 1M vectors 40 gave recall@10 .85 at ef 128 (.955 at ef
1024), 100 gave 1.000 at ef 128, for about the same build time on 2 shared cores (16.7 min)."""
EF_SEARCH = 128
"""Candidates kept while searching, raised to ``k`` when more hits are asked for: recall@10
.997 at 100k vectors (.992 at 64) for 0.3 ms of CPU."""
MAX_EF_SEARCH = 2_048
"""The widest walk a filtered search makes (``EF_SEARCH`` divided by the share allowed)."""
EXACT_SCOPE_ROWS = 2_048
"""A filtered scope this small is scanned exactly: cheaper than the graph, and always complete."""
EXACT_SCOPE_SHARE = 0.02
"""A filter allowing under this share of the rows is scanned exactly: HNSW under a very narrow
filter walks most of the graph to find few allowed rows, and may miss some."""

_BUILD_LOCK = threading.Lock()  # faiss' thread count is process-wide


class AnnIndex:
    """An HNSW graph over unit vectors, scored by inner product (= cosine), row numbers as ids.

    Args:
        index: A faiss ``IndexHNSWFlat`` (float32 rows) or ``IndexHNSWSQ`` with ``QT_fp16``
            (float16 rows) whose ids are the store's row numbers.
    """

    def __init__(self, index: Any) -> None:
        self._index = index
        self.rows: int = int(index.ntotal)
        self.dimension: int = int(index.d)
        storage = faiss.downcast_index(index.storage)
        self.dtype: VectorDtype = (
            "float16" if isinstance(storage, faiss.IndexScalarQuantizer) else "float32"
        )
        """How the graph stores its rows: as the index's ``vectors.npy`` does."""

    @classmethod
    def build(cls, vectors: Matrix, *, m: int = HNSW_M, threads: int | None = None) -> AnnIndex:
        """Build the graph over ``vectors`` (unit rows), on ``threads`` threads (all cores).

        float16 ``vectors`` give a float16 graph holding exactly those rows.
        """
        matrix = np.ascontiguousarray(vectors, dtype=np.float32)
        if matrix.ndim != 2 or not matrix.shape[0]:
            raise ValueError(f"need a non-empty 2-d matrix of vectors, got shape {matrix.shape}")
        index: Any
        if np.asarray(vectors).dtype == np.float16:
            fp16: Any = faiss.ScalarQuantizer.QT_fp16
            index = faiss.IndexHNSWSQ(matrix.shape[1], fp16, m, faiss.METRIC_INNER_PRODUCT)
        else:
            index = faiss.IndexHNSWFlat(matrix.shape[1], m, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = EF_CONSTRUCTION
        with _BUILD_LOCK:
            before = faiss.omp_get_max_threads()
            faiss.omp_set_num_threads(threads or os.cpu_count() or 1)
            try:
                index.add(matrix)
            finally:
                faiss.omp_set_num_threads(before)
        return cls(index)

    def vectors(self) -> Matrix:
        """The graph's own copy of the vectors, read-only, without copying them.

        An index with a graph searches these instead of ``vectors.npy``: one copy in memory
        (memory-mapped from ``ann.faiss`` after :meth:`load`, so shared between processes),
        not two. The array keeps the graph alive.
        """
        storage: Any = faiss.downcast_index(self._index.storage)
        if self.dtype == "float16":  # QT_fp16 codes are IEEE half floats, row after row
            address, typestr = int(storage.codes.data()), "<f2"
        else:
            address, typestr = int(storage.get_xb()), "<f4"  # an IndexFlat's data
        view = np.asarray(_Borrowed(self, address, (self.rows, self.dimension), typestr))
        view.flags.writeable = False
        return view

    def save(self, path: Path) -> None:
        """Write the graph and its vectors to ``path``."""
        faiss.write_index(self._index, str(path))

    @classmethod
    def load(
        cls, path: Path, *, rows: int, dimension: int, dtype: VectorDtype = "float32"
    ) -> AnnIndex:
        """Open a graph written by :meth:`save`, memory-mapped (shared by processes).

        Raises:
            IndexStoreError: The file is unreadable, or holds another number of rows, another
                dimension or another dtype than the index (the message names the file).
        """
        try:
            index = faiss.read_index(str(path), faiss.IO_FLAG_MMAP_IFC)
        except RuntimeError as e:
            raise IndexStoreError(f"index file {path} is corrupt: {e}") from e
        if int(index.ntotal) != rows or int(index.d) != dimension:
            raise IndexStoreError(
                f"index file {path} is corrupt: it holds {index.ntotal} {index.d}-dimensional "
                f"vectors, the index {rows} {dimension}-dimensional ones; re-ingest to rebuild it"
            )
        graph = cls(index)
        if graph.dtype != dtype:
            raise IndexStoreError(
                f"index file {path} is corrupt: it stores {graph.dtype} vectors, the manifest "
                f"says {dtype}; re-ingest to rebuild it"
            )
        return graph

    def search(
        self,
        query: Matrix,
        k: int,
        vectors: Matrix,
        mask: npt.NDArray[np.bool_] | None,
    ) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.float32]]:
        """The (about) best ``k`` rows allowed by ``mask`` for the unit ``query``, best first.

        ``vectors`` are the store's rows (the exact scan of a small scope reads them). Every
        row returned is allowed by ``mask``; a scope of at most ``k`` rows, or one the graph
        leaves short, is scanned exactly, so the hits never stop short of ``k`` while the scope
        holds more.

        Raises:
            ValueError: ``k`` < 1.
        """
        if k < 1:
            raise ValueError(f"k must be > 0, but got {k}")
        params = faiss.SearchParametersHNSW()  # type: ignore[attr-defined]  # absent from faiss' stubs
        params.efSearch = max(EF_SEARCH, k)
        allowed = self.rows
        bits: npt.NDArray[np.uint8] | None = None
        if mask is not None:
            allowed = int(np.count_nonzero(mask))
            if allowed <= max(EXACT_SCOPE_ROWS, k) or allowed < EXACT_SCOPE_SHARE * self.rows:
                return exact_rows(vectors, query, k, np.flatnonzero(mask))
            # the walk skips rows the filter refuses: widen it as the filter narrows
            params.efSearch = min(int(params.efSearch * self.rows / allowed), MAX_EF_SEARCH)
            bits = np.packbits(mask, bitorder="little")
            params.sel = faiss.IDSelectorBitmap(self.rows, faiss.swig_ptr(bits))
        scores, ids = self._index.search(query.reshape(1, -1), k, params=params)
        rows = ids[0]
        keep = rows >= 0
        if mask is not None:  # the selector already did this; a filter is never left to it alone
            keep &= mask[np.where(keep, rows, 0)]
        rows, found = rows[keep].astype(np.intp), scores[0][keep]
        if len(rows) < min(k, allowed):  # the graph could not fill k: scan the scope exactly
            return exact_rows(vectors, query, k, None if mask is None else np.flatnonzero(mask))
        return rows, found.astype(np.float32)


class _Borrowed:
    """Memory owned by faiss, seen by numpy: the array's base, so the owner outlives it."""

    def __init__(self, owner: AnnIndex, address: int, shape: tuple[int, int], typestr: str) -> None:
        self.owner = owner
        self.__array_interface__ = {
            "shape": shape,
            "typestr": typestr,
            "data": (address, True),
            "version": 3,
        }


def exact_rows(
    vectors: Matrix, query: Matrix, k: int, rows: npt.NDArray[np.intp] | None
) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.float32]]:
    """The exact best ``k`` of ``rows`` (None: all rows) by inner product, best first."""
    chosen = np.arange(vectors.shape[0]) if rows is None else rows
    if not len(chosen):
        return np.empty(0, dtype=np.intp), np.empty(0, dtype=np.float32)
    block = vectors if rows is None else np.asarray(vectors[rows])
    scores = np.einsum("ij,j->i", block, query).astype(np.float32)
    best = top_k(scores, k)
    return chosen[best], scores[best]
