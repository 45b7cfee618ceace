"""The parent-child tier: search the small child chunks, return their whole parent sections."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ragtiller.index._compute import CpuTier, top_k
from ragtiller.index._records import RecordTable
from ragtiller.index.dense import NumpyVectorStore
from ragtiller.types import Hit, SearchRequest

PARENTS_FILE = "parents.jsonl"
MATCHED_WINDOW = 4
"""A parent's matched children are its children among the top ``MATCHED_WINDOW * k`` children."""


class ParentChildTier(CpuTier):
    """The ``parent_child`` tier: parents ranked by the cosine of their best child.

    Small children make precise matches; their parent sections make readable context. Each hit
    is a parent (``id`` and ``text`` of the section, ``parent_id`` None) whose ``score`` is its
    best child's cosine; ``metadata["matched_child_ids"]`` lists the parent's children among the
    top ``4 * k`` children overall, best first (always at least the best one). Namespace and
    metadata filters apply to the children. ``asearch`` runs inline up to
    :data:`~ragtiller.index._compute.INLINE_ROWS` children and in a worker thread above.

    Args:
        store: The child chunks and their vectors; children name their parent in ``parent_id``.
        parents: The parent sections.
    """

    name = "parent_child"
    needs_vector = True

    def __init__(self, store: NumpyVectorStore, parents: RecordTable) -> None:
        self.store = store
        self.parents = parents
        self._seen: RecordTable | None = None
        self._child_parent: npt.NDArray[np.intp] = np.empty(0, dtype=np.intp)

    def search(self, request: SearchRequest) -> list[Hit]:
        """At most ``k`` parent sections, best first.

        Raises:
            ValueError: ``vector`` is None, has the wrong dimension, or ``k`` < 1.
        """
        if request.vector is None:
            raise ValueError("the parent_child tier needs a query vector, but got None")
        if request.k < 1:
            raise ValueError(f"k must be > 0, but got {request.k}")
        children = self.store.records
        rows, scores = self.store.score_rows(
            request.vector, namespaces=request.namespaces, filter=request.filter
        )
        parent_of = self._parent_index(children)[rows]
        known = parent_of >= 0
        rows, scores, parent_of = rows[known], scores[known], parent_of[known]
        if not len(rows):
            return []
        best = np.full(len(self.parents), -np.inf, dtype=np.float32)
        np.maximum.at(best, parent_of, scores)
        touched = np.flatnonzero(best > -np.inf)
        chosen = touched[top_k(best[touched], request.k)]
        window = top_k(scores, MATCHED_WINDOW * request.k)
        hits: list[Hit] = []
        for parent in chosen.tolist():
            mine = window[parent_of[window] == parent]
            if not len(mine):
                of_parent = np.flatnonzero(parent_of == parent)
                mine = of_parent[[int(np.argmax(scores[of_parent]))]]
            matched = [children.ids[r] for r in rows[mine].tolist()]
            hits.append(self.parents.hit(parent, float(best[parent]), matched_child_ids=matched))
        return hits

    @property
    def rows(self) -> int:
        """Rows one search scans."""
        return len(self.store)

    def _parent_index(self, children: RecordTable) -> npt.NDArray[np.intp]:
        """Parent row of each child row (-1 when unknown), recomputed when the store changes."""
        if self._seen is not children:
            lookup = self.parents.row
            self._child_parent = np.fromiter(
                (
                    -1 if (p := lookup(str(md.get("parent_id")))) is None else p
                    for md in children.metadatas
                ),
                dtype=np.intp,
                count=len(children),
            )
            self._seen = children
        return self._child_parent
