"""The parent-child tier: search the small child chunks, return the best in its section's window."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ragtiller.core.tiers import Hit, SearchRequest
from ragtiller.index.compute import top_k
from ragtiller.index.dense import NumpyVectorStore
from ragtiller.index.dense_tier import StoreTier
from ragtiller.index.records import RecordTable

PARENT_ROWS_FILE = "parent_rows.npy"  # each child row's parent row, saved at ingest
MATCHED_WINDOW = 4  # a parent's matched children: its children among the top 4 * k
CANDIDATE_MULTIPLIER = 8  # an approximate search ranks parents among 8 * k children: 4 * k more
WINDOW_SUFFIX = "+window"  # a window's id: its best child's (the child itself is another hit)


def parent_rows(children: RecordTable, parents: RecordTable) -> npt.NDArray[np.intp]:
    """The row in ``parents`` of each child's ``parent_id`` (-1 when it has none there)."""
    lookup = parents.row
    return np.fromiter(
        (-1 if (p := lookup(str(md.get("parent_id")))) is None else p for md in children.metadatas),
        dtype=np.intp,
        count=len(children),
    )


class ParentChildTier(StoreTier):
    """Sections ranked by their best child (precise), shown as a window of whole neighbouring
    children within ``window_words`` words (readable); ``metadata`` names the ``child_ids`` in it
    and the ``matched_child_ids`` among the top ``4 * k`` children."""

    name = "parent_child"
    needs_vector = True

    def __init__(
        self,
        store: NumpyVectorStore,
        parents: RecordTable,
        *,
        window_words: int = 300,
        approximate: bool = False,
        child_parents: npt.NDArray[np.intp] | None = None,
    ) -> None:
        if window_words < 1:
            raise ValueError(f"window_words must be > 0, but got {window_words}")
        super().__init__(store, approximate=approximate)
        self.parents = parents
        self.window_words = window_words
        self._seen: RecordTable | None = None  # the children the parent rows below are of
        self._child_parent = self._order = self._bounds = np.empty(0, dtype=np.intp)
        if child_parents is not None:  # computed at ingest (or by this tier) for these rows
            self._parent_index(store.records, child_parents)

    def with_window(self, window_words: int) -> ParentChildTier:
        return self._copy(window_words, self.approximate)

    def with_search(self, approximate: bool) -> ParentChildTier:
        """This tier over the HNSW graph (True) or every child (False)."""
        return self._copy(self.window_words, approximate)

    def _copy(self, window_words: int, approximate: bool) -> ParentChildTier:
        if (window_words, approximate) == (self.window_words, self.approximate):
            return self
        known = self._child_parent if self._seen is self.store.records else None
        return ParentChildTier(
            self.store,
            self.parents,
            window_words=window_words,
            approximate=approximate,
            child_parents=known,
        )

    def search(self, request: SearchRequest) -> list[Hit]:
        if request.vector is None:
            raise ValueError("the parent_child tier needs a query vector, but got None")
        if request.k < 1:
            raise ValueError(f"k must be > 0, but got {request.k}")
        vector, namespaces, filter = request.vector, request.namespaces, request.filter
        if self.approximate:
            rows, scores = self.store.nearest_rows(
                vector,
                CANDIDATE_MULTIPLIER * request.k,
                namespaces=namespaces,
                filter=filter,
                approximate=True,
            )
        else:
            rows, scores = self.store.score_rows(vector, namespaces=namespaces, filter=filter)
        parent_of = self._parent_index(self.store.records)[rows]
        known = parent_of >= 0
        rows, scores, parent_of = rows[known], scores[known], parent_of[known]
        if not len(rows):
            return []
        best = np.full(len(self.parents), -np.inf, dtype=np.float32)
        np.maximum.at(best, parent_of, scores)
        touched = np.flatnonzero(best > -np.inf)
        chosen = touched[top_k(best[touched], request.k)]
        window = top_k(scores, MATCHED_WINDOW * request.k)
        matched_rows: dict[int, list[int]] = {}  # each parent's children in the window, best first
        for child, parent in zip(rows[window].tolist(), parent_of[window].tolist(), strict=True):
            matched_rows.setdefault(parent, []).append(child)
        hits: list[Hit] = []
        for parent in chosen.tolist():
            mine = matched_rows.get(parent)
            if mine is None:
                of_parent = np.flatnonzero(parent_of == parent)
                mine = [int(rows[of_parent[int(np.argmax(scores[of_parent]))]])]
            hits.append(self._window_hit(parent, mine, float(best[parent])))
        return hits

    def _window_hit(self, parent: int, matched: list[int], score: float) -> Hit:
        """Section ``parent`` through a window around its best child row, ``matched[0]``."""
        child = matched[0]
        mine = self._order[self._bounds[parent] : self._bounds[parent + 1]].tolist()
        read = {r: self.store.records.fields(r) for r in mine}  # (id, text, metadata), read once
        siblings = sorted(read, key=lambda r: int(read[r][2].get("start", 0)))
        span = [read[r][2] for r in siblings]
        if any("start" not in md or "end" not in md for md in span):
            text = read[child][1]  # no offsets into the section: the child alone
            siblings, span = [child], [{"start": 0, "end": len(text)}]
        else:
            text = self.parents.texts[parent]
        lo = hi = siblings.index(child)

        def size(a: int, b: int) -> int:
            return len(text[int(span[a]["start"]) : int(span[b]["end"])].split())

        grew = True
        while grew:
            grew = False
            if lo > 0 and size(lo - 1, hi) <= self.window_words:
                lo, grew = lo - 1, True
            if hi + 1 < len(siblings) and size(lo, hi + 1) <= self.window_words:
                hi, grew = hi + 1, True
        start, end = int(span[lo]["start"]), int(span[hi]["end"])
        section = self.parents.hit(
            parent,
            score,
            matched_child_ids=[read[r][0] for r in matched],
            child_ids=[read[r][0] for r in siblings[lo : hi + 1]],
            start=start,
            end=end,
        )
        return {
            **section,
            "id": read[child][0] + WINDOW_SUFFIX,
            "text": text[start:end],
            "parent_id": self.parents.ids[parent],
        }

    def _parent_index(
        self, children: RecordTable, known: npt.NDArray[np.intp] | None = None
    ) -> npt.NDArray[np.intp]:
        """Each child row's parent row (-1: none), recomputed when the store's rows change."""
        if self._seen is not children:
            self._child_parent = np.asarray(
                parent_rows(children, self.parents) if known is None else known, dtype=np.intp
            )
            self._order = np.argsort(self._child_parent, kind="stable")
            bounds = np.arange(len(self.parents) + 1)
            self._bounds = np.searchsorted(self._child_parent[self._order], bounds)
            self._seen = children
        return self._child_parent
