"""Approximate dense search: an HNSW graph (faiss) over the store's vectors, filters kept exact:
an exact scan costs 150 ms at 1M chunks, HNSW under a millisecond at recall@10 >= 0.98
(``benchmarks/README.md``, "Scaling"); faiss beat hnswlib and usearch."""

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
"""Smallest index that gets (and under ``search: auto`` searches) a graph: below it an exact scan
costs under ~6 ms and is exact (``benchmarks/bench_ann.py``)."""
HNSW_M = 32  # neighbours per node: recall@10 .992 at ef 64 on 100k vectors, .988 with 16
EF_CONSTRUCTION = 100  # at 1M vectors 40 gave recall@10 .85 at ef 128, 100 gave 1.000
EF_SEARCH = 128  # raised to k: recall@10 .997 at 100k vectors (.992 at 64) for 0.3 ms
MAX_EF_SEARCH = 2_048  # the widest walk a filtered search makes
EXACT_SCOPE_ROWS = 2_048  # a filtered scope this small is scanned exactly: cheaper, complete
EXACT_SCOPE_SHARE = 0.02  # a narrower filter is scanned: HNSW would walk most of the graph

_BUILD_LOCK = threading.Lock()  # faiss' thread count is process-wide


class AnnIndex:
    """An HNSW graph over unit vectors, scored by inner product (= cosine), row numbers as ids."""

    def __init__(self, index: Any) -> None:
        self._index = index
        self.rows: int = int(index.ntotal)
        self.dimension: int = int(index.d)
        quantized = isinstance(faiss.downcast_index(index.storage), faiss.IndexScalarQuantizer)
        self.dtype: VectorDtype = "float16" if quantized else "float32"  # as vectors.npy has them

    @classmethod
    def build(cls, vectors: Matrix) -> AnnIndex:
        """The graph over ``vectors`` (unit rows), built on all cores."""
        matrix = np.ascontiguousarray(vectors, dtype=np.float32)
        if matrix.ndim != 2 or not matrix.shape[0]:
            raise ValueError(f"need a non-empty 2-d matrix of vectors, got shape {matrix.shape}")
        dim, ip = matrix.shape[1], faiss.METRIC_INNER_PRODUCT
        fp16: Any = faiss.ScalarQuantizer.QT_fp16
        index: Any = (  # a float16 graph keeps the same float16 rows (recall@10 .9995 at 50k)
            faiss.IndexHNSWSQ(dim, fp16, HNSW_M, ip)
            if np.asarray(vectors).dtype == np.float16
            else faiss.IndexHNSWFlat(dim, HNSW_M, ip)
        )
        index.hnsw.efConstruction = EF_CONSTRUCTION
        with _BUILD_LOCK:
            before = faiss.omp_get_max_threads()
            faiss.omp_set_num_threads(os.cpu_count() or 1)
            try:
                index.add(matrix)
            finally:
                faiss.omp_set_num_threads(before)
        return cls(index)

    def vectors(self) -> Matrix:
        """The graph's own copy of the vectors, not copied: an index holds one copy, not two."""
        storage: Any = faiss.downcast_index(self._index.storage)
        if self.dtype == "float16":  # QT_fp16 codes are IEEE half floats, row after row
            address, typestr = int(storage.codes.data()), "<f2"
        else:
            address, typestr = int(storage.get_xb()), "<f4"  # an IndexFlat's data
        view = np.asarray(_Borrowed(self, address, (self.rows, self.dimension), typestr))
        view.flags.writeable = False
        return view

    def save(self, path: Path) -> None:
        faiss.write_index(self._index, str(path))

    @classmethod
    def load(
        cls, path: Path, *, rows: int, dimension: int, dtype: VectorDtype = "float32"
    ) -> AnnIndex:
        """Open a graph written by :meth:`save`, memory-mapped, checked against the index."""
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
        self, query: Matrix, k: int, vectors: Matrix, mask: npt.NDArray[np.bool_] | None
    ) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.float32]]:
        """About the best ``k`` rows ``mask`` allows; a small or short scope is scanned exactly."""
        if k < 1:
            raise ValueError(f"k must be > 0, but got {k}")
        params = faiss.SearchParametersHNSW()  # type: ignore[attr-defined]  # absent from faiss' stubs
        params.efSearch = max(EF_SEARCH, k)
        allowed = self.rows
        if mask is not None:
            allowed = int(np.count_nonzero(mask))
            if allowed <= max(EXACT_SCOPE_ROWS, k) or allowed < EXACT_SCOPE_SHARE * self.rows:
                return _exact_rows(vectors, query, k, np.flatnonzero(mask))
            # the walk skips rows the filter refuses: widen it as the filter narrows
            params.efSearch = min(int(params.efSearch * self.rows / allowed), MAX_EF_SEARCH)
            bits = np.packbits(mask, bitorder="little")  # a local: alive through the search
            params.sel = faiss.IDSelectorBitmap(self.rows, faiss.swig_ptr(bits))
        scores, ids = self._index.search(query.reshape(1, -1), k, params=params)
        rows = ids[0]
        keep = rows >= 0
        if mask is not None:  # the selector already did this; a filter is never left to it alone
            keep &= mask[np.where(keep, rows, 0)]
        rows, found = rows[keep].astype(np.intp), scores[0][keep]
        if len(rows) < min(k, allowed):  # the graph could not fill k: scan the scope exactly
            return _exact_rows(vectors, query, k, None if mask is None else np.flatnonzero(mask))
        return rows, found.astype(np.float32)


class _Borrowed:
    """Memory owned by faiss, seen by numpy: the array's base, so the owner outlives it."""

    def __init__(self, owner: AnnIndex, address: int, shape: tuple[int, int], kind: str) -> None:
        self.owner = owner
        self.__array_interface__ = dict(shape=shape, typestr=kind, data=(address, True), version=3)


def _exact_rows(
    vectors: Matrix, query: Matrix, k: int, rows: npt.NDArray[np.intp] | None
) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.float32]]:
    chosen = np.arange(vectors.shape[0]) if rows is None else rows
    if not len(chosen):
        return np.empty(0, dtype=np.intp), np.empty(0, dtype=np.float32)
    block = vectors if rows is None else np.asarray(vectors[rows])
    scores = np.einsum("ij,j->i", block, query).astype(np.float32)
    best = top_k(scores, k)
    return chosen[best], scores[best]


def load_graph(
    version: Path, rows: int, dimension: int, dtype: VectorDtype = "float32"
) -> AnnIndex | None:
    """The graph ``version`` holds for its ``rows`` vectors, or None when it has none."""
    if not rows or not (version / ANN_FILE).is_file():
        return None
    return AnnIndex.load(version / ANN_FILE, rows=rows, dimension=dimension, dtype=dtype)
