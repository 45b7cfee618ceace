"""The ``dense`` tier: chunks by cosine with the query, exactly or through the HNSW graph."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import numpy.typing as npt

from ragtiller.core.tiers import Hit, SearchRequest
from ragtiller.index import compute
from ragtiller.index.compute import CpuTier, top_k
from ragtiller.index.dense import NumpyVectorStore
from ragtiller.models.batch_embedding import normalize_rows

MOVED_DEPTH = 1000  # chunks nearest the question that Rocchio's second pass re-scores


class StoreTier(CpuTier):
    """A tier over a vector store's rows, searched exactly or through its HNSW graph."""

    name: str

    def __init__(self, store: NumpyVectorStore, *, approximate: bool = False) -> None:
        if approximate and store.ann is None:
            raise ValueError(f"an approximate {self.name} tier needs a store with an HNSW graph")
        self.store = store
        self.approximate = approximate  # search the HNSW graph instead of every row

    @property
    def rows(self) -> int:
        return len(self.store)

    def inline(self, request: SearchRequest) -> bool:
        """An unfiltered graph search (well under a millisecond) runs on the loop too."""
        return (self.approximate and not request.filter) or super().inline(request)


class DenseTier(StoreTier):
    """Not the store itself: ``VectorStore.search`` already means something else."""

    name = "dense"
    needs_vector = True

    def with_search(self, approximate: bool) -> DenseTier:
        if approximate == self.approximate:
            return self
        return DenseTier(self.store, approximate=approximate)

    def search(self, request: SearchRequest) -> list[Hit]:
        if request.vector is None:
            raise ValueError("the dense tier needs a query vector, but got None")
        pairs = self.store.search_rows(
            request.vector,
            request.k,
            namespaces=request.namespaces,
            filter=request.filter,
            approximate=self.approximate,
        )
        records = self.store.records
        return [records.hit(row, score) for row, score in pairs]

    def search_moved(self, request: SearchRequest, moved: Sequence[float]) -> list[Hit]:
        """Rocchio's second pass: the chunks nearest the vector, rescored against ``moved``."""
        if self.approximate:
            return self.search(replace(request, vector=moved))
        if request.vector is None:
            raise ValueError("the dense tier needs a query vector, but got None")
        rows, _ = self.store.nearest_rows(
            request.vector, MOVED_DEPTH, namespaces=request.namespaces, filter=request.filter
        )
        if not len(rows):
            return []
        block = np.asarray(self.store.vectors)[rows]  # a plain gather: a memmap's costs 1.6x
        scores = np.einsum("ij,j->i", block, normalize_rows(moved)[0]).astype(np.float32)
        best = top_k(scores, request.k)
        records = self.store.records
        return [
            records.hit(row, score)
            for row, score in zip(rows[best].tolist(), scores[best].tolist(), strict=True)
        ]

    async def asearch_moved(self, request: SearchRequest, moved: Sequence[float]) -> list[Hit]:
        if self.inline(request):
            return self.search_moved(request, moved)
        work = functools.partial(self.search_moved, request, moved)
        return await asyncio.wrap_future(compute.CPU.submit(work))

    def vectors_of(
        self, request: SearchRequest, ids: Sequence[str]
    ) -> tuple[list[str], npt.NDArray[np.float32]]:
        """Those of ``ids`` in the request's scope, with their unit vectors (Rocchio's feedback)."""
        found, rows = self.store.records.rows_in_scope(ids, request.namespaces, request.filter)
        return found, np.asarray(self.store.vectors[rows], dtype=np.float32)
