"""The ``dense`` tier: child chunks of a :class:`~ragtiller.index.dense.NumpyVectorStore` ranked
by cosine with the query vector, exactly or through the store's HNSW graph."""

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


class DenseTier(CpuTier):
    """A separate class from the store because ``VectorStore.search`` already means something
    else. ``asearch`` runs inline up to :data:`~ragtiller.index.compute.INLINE_ROWS` rows."""

    name = "dense"
    needs_vector = True

    def __init__(self, store: NumpyVectorStore, *, approximate: bool = False) -> None:
        if approximate and store.ann is None:
            raise ValueError("an approximate dense tier needs a store with an HNSW graph")
        self.store = store
        self.approximate = approximate  # search the HNSW graph instead of every row

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
        """Rocchio's second pass: at most ``k`` of the :data:`MOVED_DEPTH` chunks in scope
        nearest the request's vector, best first by their cosine to ``moved``; an approximate
        tier searches its graph with ``moved`` instead."""
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

    @property
    def rows(self) -> int:
        return len(self.store)

    async def asearch(self, request: SearchRequest) -> list[Hit]:
        """An unfiltered graph search (well under a millisecond) runs inline, any scan in a
        worker thread."""
        if self.approximate and not request.filter:
            return self.search(request)
        return await super().asearch(request)
