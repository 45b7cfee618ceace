"""The vector store behind the dense tiers: exact cosine search over a numpy matrix (float32, or
float16 scored in float32), also a LangChain VectorStore."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import VectorStore

from ragtiller.errors import IndexStoreError
from ragtiller.index.ann import ANN_FILE, AnnIndex
from ragtiller.index.compute import SharedScans, scan_key, top_k
from ragtiller.index.manifest import VectorDtype
from ragtiller.index.records import RecordTable, ensure_json_metadata
from ragtiller.models.batch_embedding import Matrix, normalize_rows

VECTORS_FILE = "vectors.npy"
CHUNKS_FILE = "chunks.jsonl"


class NumpyVectorStore(VectorStore):
    """An exact, in-process vector store and a full LangChain ``VectorStore``: normalised rows
    (float32, or float16 at half the memory), cosine scores, numpy top-k. :meth:`load`
    memory-maps the vectors, so an index larger than RAM pages in on demand. Not thread-safe
    for writes during searches.

    Example:
        >>> from ragtiller.models import HashingEmbedder
        >>> store = NumpyVectorStore.from_texts(["red apple", "blue sea"], HashingEmbedder())
        >>> store.similarity_search("apple", k=1)[0].page_content
        'red apple'
    """

    def __init__(self, embedding: Embeddings) -> None:
        self._embedding = embedding
        self._records = RecordTable([], [], [])
        self._vectors: Matrix = np.empty((0, 0), dtype=np.float32)
        self._all_rows: npt.NDArray[np.intp] = np.empty(0, dtype=np.intp)
        self._scans = SharedScans()
        self._ann: AnnIndex | None = None

    @classmethod
    def from_vectors(
        cls,
        texts: Sequence[str],
        vectors: npt.ArrayLike,
        embedding: Embeddings,
        metadatas: Sequence[dict[str, Any]] | None = None,
        *,
        ids: Sequence[str] | None = None,
        dtype: VectorDtype = "float32",
    ) -> NumpyVectorStore:
        """A store over vectors computed elsewhere (normalised here, stored as ``dtype``)."""
        store = cls(embedding)
        matrix = normalize_rows(vectors) if len(texts) else np.empty((0, 0), dtype=np.float32)
        store._set(_table(texts, metadatas, ids), matrix.astype(dtype, copy=False))
        return store

    @classmethod
    def from_texts(
        cls,
        texts: list[str],
        embedding: Embeddings,
        metadatas: list[dict[str, Any]] | None = None,
        *,
        ids: list[str] | None = None,
        **kwargs: Any,
    ) -> NumpyVectorStore:
        store = cls(embedding)
        store.add_texts(texts, metadatas, ids=ids)
        return store

    @property
    def embeddings(self) -> Embeddings:
        return self._embedding

    @property
    def records(self) -> RecordTable:
        """The current rows (replaced, never mutated, by writes)."""
        return self._records

    @property
    def vectors(self) -> Matrix:
        """The normalised vectors, one row per record; a read-only memmap after :meth:`load`."""
        return self._vectors

    def __len__(self) -> int:
        return len(self._records)

    @property
    def ann(self) -> AnnIndex | None:
        """The HNSW graph over the current rows, if one is attached (any write drops it)."""
        return self._ann

    def attach_ann(self, ann: AnnIndex) -> None:
        """Let ``approximate`` searches use ``ann``, a graph over exactly the current rows."""
        rows, dim = self._vectors.shape
        if (ann.rows, ann.dimension) != (rows, dim):
            raise ValueError(
                f"the graph holds {ann.rows} {ann.dimension}-d rows, the store {rows} {dim}-d"
            )
        self._ann = ann

    def add_texts(
        self,
        texts: Iterable[str],
        metadatas: list[dict[str, Any]] | None = None,
        *,
        ids: list[str] | None = None,
        **kwargs: Any,
    ) -> list[str]:
        """Embed and add texts (upsert); the ids, uuid4 hex where none were given."""
        texts = list(texts)
        if not texts:
            return []
        table = _table(texts, metadatas, ids)
        vectors = normalize_rows(self._embedding.embed_documents(texts))
        if len(self._records) and vectors.shape[1] != self._vectors.shape[1]:
            raise ValueError(
                f"embedder returned {vectors.shape[1]}-dimensional vectors but the store holds "
                f"{self._vectors.shape[1]}-dimensional ones"
            )
        self.delete(list(table.ids))
        if not len(self._records):
            self._set(table, vectors)
        else:  # a float16 store stays float16
            added = vectors.astype(self._vectors.dtype, copy=False)
            merged = self._records.extend(table.ids, table.texts, table.metadatas)
            self._set(merged, np.concatenate([self._vectors, added]))
        return list(table.ids)

    def delete(self, ids: list[str] | None = None, **kwargs: Any) -> bool | None:
        """Delete rows by id (``None``: everything); True when a row was deleted."""
        if ids is None:
            deleted = len(self._records) > 0
            self._set(RecordTable([], [], []), np.empty((0, 0), dtype=np.float32))
            return deleted
        rows = {r for r in map(self._records.row, ids) if r is not None}
        if not rows:
            return False
        keep = np.ones(len(self._records), dtype=np.bool_)
        keep[list(rows)] = False
        self._set(self._records.select(keep), np.asarray(self._vectors[keep]))
        return True

    def get_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        rows = (self._records.row(i) for i in ids)
        return [self._records.document(r) for r in rows if r is not None]

    def similarity_search(self, query: str, k: int = 4, **kwargs: Any) -> list[Document]:
        return [d for d, _ in self.similarity_search_with_score(query, k, **kwargs)]

    def similarity_search_with_score(
        self, query: str, k: int = 4, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        vector = self._embedding.embed_query(query)
        return self.similarity_search_with_score_by_vector(vector, k, **kwargs)

    def similarity_search_by_vector(
        self, embedding: list[float], k: int = 4, **kwargs: Any
    ) -> list[Document]:
        return [d for d, _ in self.similarity_search_with_score_by_vector(embedding, k, **kwargs)]

    def similarity_search_with_score_by_vector(
        self,
        embedding: Sequence[float],
        k: int = 4,
        *,
        filter: Mapping[str, Any] | None = None,
        namespaces: Sequence[str] | None = None,
        **kwargs: Any,
    ) -> list[tuple[Document, float]]:
        """Documents with their cosine, best first; ``filter`` and ``namespaces`` scope them."""
        return [
            (self._records.document(row), score)
            for row, score in self.search_rows(embedding, k, namespaces=namespaces, filter=filter)
        ]

    def _select_relevance_score_fn(self) -> Callable[[float], float]:
        """Relevance in [0, 1] for LangChain's threshold search: the cosine, clipped at 0."""
        return lambda score: min(max(score, 0.0), 1.0)

    def score_rows(
        self,
        vector: Sequence[float],
        *,
        namespaces: Sequence[str] | None = None,
        filter: Mapping[str, Any] | None = None,
    ) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.float32]]:
        """Row numbers in scope and their cosines (read-only, in row order). The same query on
        the same store is scanned once: a turn's dense and parent-child tiers share it."""
        rows_total, dim = self._vectors.shape
        query = normalize_rows(vector)[0]
        if not rows_total:
            return np.empty(0, dtype=np.intp), np.empty(0, dtype=np.float32)
        if query.shape[0] != dim:
            raise ValueError(f"query vector has {query.shape[0]} dimensions, the store {dim}")
        key = scan_key(query, namespaces, filter)
        if key is None:
            return self._scan(query, namespaces, filter)
        return self._scans.get(key, lambda: self._scan(query, namespaces, filter))

    def _scan(
        self, query: Matrix, namespaces: Sequence[str] | None, filter: Mapping[str, Any] | None
    ) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.float32]]:
        """Score every row in one pass, then mask: gathering the selected rows first copies them
        on every search and costs 3.5x the scan itself."""
        scores = _cosines(self._vectors, query)
        mask = self._records.mask(namespaces, filter)
        if mask is None:
            rows = self._all_rows
        else:
            rows = np.flatnonzero(mask)
            scores = scores[rows]
            rows.flags.writeable = False
        scores.flags.writeable = False
        return rows, scores

    def search_rows(
        self,
        vector: Sequence[float],
        k: int,
        *,
        namespaces: Sequence[str] | None = None,
        filter: Mapping[str, Any] | None = None,
        approximate: bool = False,
    ) -> list[tuple[int, float]]:
        rows, scores = self.nearest_rows(
            vector, k, namespaces=namespaces, filter=filter, approximate=approximate
        )
        return list(zip(rows.tolist(), scores.tolist(), strict=True))

    def nearest_rows(
        self,
        vector: Sequence[float],
        k: int,
        *,
        namespaces: Sequence[str] | None = None,
        filter: Mapping[str, Any] | None = None,
        approximate: bool = False,
    ) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.float32]]:
        """Row numbers and cosines of the best ``k`` rows in scope, best first; ``approximate``
        searches the HNSW graph instead of every row (the scope is exact either way)."""
        if k < 1:
            raise ValueError(f"k must be > 0, but got {k}")
        if approximate:
            ann = self._ann
            if ann is None:
                raise ValueError("approximate search needs an HNSW graph: attach_ann() first")
            query = normalize_rows(vector)[0]
            if query.shape[0] != ann.dimension:
                raise ValueError(
                    f"query vector has {query.shape[0]} dimensions, the store {ann.dimension}"
                )
            return ann.search(query, k, self._vectors, self._records.mask(namespaces, filter))
        rows, scores = self.score_rows(vector, namespaces=namespaces, filter=filter)
        if not len(rows):
            return rows, scores
        best = top_k(scores, k)
        return rows[best], scores[best]

    def save(self, directory: str | Path) -> None:
        """Write ``vectors.npy`` and ``chunks.jsonl`` into ``directory`` (created if needed)."""
        path = Path(directory)
        path.mkdir(parents=True, exist_ok=True)
        np.save(path / VECTORS_FILE, np.ascontiguousarray(self._vectors))
        self._records.dump(path / CHUNKS_FILE)

    @classmethod
    def load(
        cls,
        directory: str | Path,
        embedding: Embeddings,
        *,
        mmap: bool = True,
        vectors: Matrix | None = None,
        namespaces: Sequence[str] | None = None,
        dtype: VectorDtype = "float32",
    ) -> NumpyVectorStore:
        """Read a store written by :meth:`save`. Every vector is checked once, so a corrupt file
        fails the open, not every search. ``vectors`` given (an HNSW graph's own copy) are
        searched instead of the file's, which is then never read: one copy in memory, not two."""
        path = Path(directory)
        records = RecordTable.load(path / CHUNKS_FILE, namespaces=namespaces)
        vectors_path = path / VECTORS_FILE
        try:
            stored = np.load(vectors_path, mmap_mode="r" if mmap else None, allow_pickle=False)
        except FileNotFoundError as e:
            raise IndexStoreError(f"index file {vectors_path} is missing") from e
        except (OSError, ValueError) as e:
            raise IndexStoreError(f"index file {vectors_path} is corrupt: {e}") from e
        if stored.dtype != np.dtype(dtype) or stored.ndim != 2 or stored.shape[0] != len(records):
            raise IndexStoreError(
                f"index file {vectors_path} is corrupt: holds a {stored.dtype} array of shape "
                f"{stored.shape}, expected {dtype} with {len(records)} rows (one per line of "
                f"{path / CHUNKS_FILE})"
            )
        if vectors is not None and (vectors.shape, vectors.dtype) != (stored.shape, stored.dtype):
            raise IndexStoreError(
                f"index file {vectors_path} holds vectors of shape {stored.shape}, the graph "
                f"{vectors.shape} ({stored.dtype} and {vectors.dtype}); re-ingest to rebuild "
                "the index"
            )
        searched, source = (stored, vectors_path) if vectors is None else (vectors, path / ANN_FILE)
        _check_finite(searched, source)
        store = cls(embedding)
        store._set(records, searched)
        return store

    def _set(self, records: RecordTable, vectors: Matrix) -> None:
        if vectors.shape[0] != len(records):
            raise ValueError(f"got {vectors.shape[0]} vectors for {len(records)} texts")
        self._records, self._vectors = records, vectors
        self._all_rows = np.arange(len(records))
        self._all_rows.flags.writeable = False
        self._scans = SharedScans()  # scans of the old rows must not answer for the new ones
        self._ann = None  # nor a graph over them


def _table(
    texts: Sequence[str], metadatas: Sequence[dict[str, Any]] | None, ids: Sequence[str] | None
) -> RecordTable:
    if metadatas is not None and len(metadatas) != len(texts):
        raise ValueError(f"got {len(metadatas)} metadatas for {len(texts)} texts")
    if ids is not None and len(ids) != len(texts):
        raise ValueError(f"got {len(ids)} ids for {len(texts)} texts")
    ids = list(ids) if ids is not None else [uuid.uuid4().hex for _ in texts]
    mds = [
        ensure_json_metadata(md, owner=f"text {id_!r}")
        for id_, md in zip(ids, metadatas or [{} for _ in texts], strict=True)
    ]
    return RecordTable(ids, list(texts), mds)


_FINITE_CHECK_ROWS = 16_384  # per block, so a memory-mapped matrix needs little extra memory


def _check_finite(vectors: npt.NDArray[Any], path: Path) -> None:
    for first in range(0, vectors.shape[0], _FINITE_CHECK_ROWS):
        block = np.asarray(vectors[first : first + _FINITE_CHECK_ROWS])
        finite = np.isfinite(block).all(axis=1)
        if not finite.all():
            row = first + int(np.flatnonzero(~finite)[0])
            bad = int((~np.isfinite(vectors)).any(axis=1).sum())
            raise IndexStoreError(
                f"index file {path} is corrupt: {bad} vector(s) hold NaN or infinite values "
                f"(first: row {row}); rebuild the index"
            )


_F16_BLOCK_ROWS = 4_096  # float16 rows widened per block of the scan: 6 MB at 384-d


def _cosines(vectors: Matrix, query: Matrix) -> Matrix:
    """Row-wise dot products in one thread, without BLAS, in float32: a BLAS mat-vec's spinning
    threads fight each other when two tiers search at once (24 ms instead of 1.3 ms at 10k x 384
    on a loaded 2-core machine). float16 rows are widened block by block (numpy has no float16
    SIMD dot product, and a float16 sum would lose precision)."""
    if vectors.dtype == np.float32:
        scores: Matrix = np.einsum("ij,j->i", vectors, query)
        return scores
    scores = np.empty(vectors.shape[0], dtype=np.float32)
    for first in range(0, vectors.shape[0], _F16_BLOCK_ROWS):
        block = np.asarray(vectors[first : first + _F16_BLOCK_ROWS], dtype=np.float32)
        scores[first : first + len(block)] = np.einsum("ij,j->i", block, query)
    return scores
