"""The parent-child tier: search the small child chunks, return the best one in its context.

The context is a bounded window of the section: the best child and its neighbouring children,
never more than ``window_words`` words, never the whole section unless it fits.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ragtiller.core.tiers import Hit, SearchRequest
from ragtiller.index.compute import CpuTier, top_k
from ragtiller.index.dense import NumpyVectorStore
from ragtiller.index.records import RecordTable

PARENTS_FILE = "parents.jsonl"
MATCHED_WINDOW = 4
"""A parent's matched children are its children among the top ``MATCHED_WINDOW * k`` children."""
DEFAULT_WINDOW_WORDS = 300
"""Most words of one hit: the best child and as many neighbours as fit."""
WINDOW_SUFFIX = "+window"
"""A window hit's id is its best child's id with this suffix (the child itself is another hit)."""


class ParentChildTier(CpuTier):
    """The ``parent_child`` tier: sections ranked by their best child, shown as a window.

    Small children make precise matches; the neighbouring children of the same section make
    readable context. Each hit is one section's window: its best child (by cosine) widened by
    whole neighbouring children, alternately before and after, while the window stays within
    ``window_words`` words. ``id`` is the best child's id + ``+window``, ``text`` the window's span of
    the section, ``parent_id`` the section, ``score`` the best child's cosine;
    ``metadata["child_ids"]`` lists the children inside the window and
    ``metadata["matched_child_ids"]`` the section's children among the top ``4 * k`` children
    overall, best first (always at least the best one). Namespace and metadata filters apply
    to the children. ``asearch`` runs inline up to
    :data:`~ragtiller.index.compute.INLINE_ROWS` children and in a worker thread above.

    Args:
        store: The child chunks and their vectors; children name their parent in ``parent_id``
            and their span of it in ``start`` and ``end``.
        parents: The parent sections.
        window_words: Most words of one window.
    """

    name = "parent_child"
    needs_vector = True

    def __init__(
        self,
        store: NumpyVectorStore,
        parents: RecordTable,
        *,
        window_words: int = DEFAULT_WINDOW_WORDS,
    ) -> None:
        if window_words < 1:
            raise ValueError(f"window_words must be > 0, but got {window_words}")
        self.store = store
        self.parents = parents
        self.window_words = window_words
        self._seen: RecordTable | None = None
        self._child_parent: npt.NDArray[np.intp] = np.empty(0, dtype=np.intp)
        self._siblings: dict[int, list[int]] = {}

    def with_window(self, window_words: int) -> ParentChildTier:
        """This tier with windows of at most ``window_words`` words (itself if it has them)."""
        if window_words == self.window_words:
            return self
        return ParentChildTier(self.store, self.parents, window_words=window_words)

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
            hits.append(self._window_hit(parent, int(rows[mine[0]]), float(best[parent]), matched))
        return hits

    def _window_hit(self, parent: int, child: int, score: float, matched: list[str]) -> Hit:
        """Section ``parent`` seen through a window around its child row ``child``."""
        children = self.store.records
        siblings = self._siblings[parent]
        span = [children.metadatas[r] for r in siblings]
        if any("start" not in md or "end" not in md for md in span):
            siblings, span = [child], [{"start": 0, "end": len(children.texts[child])}]
            text = children.texts[child]  # no offsets into the section: the child alone
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
            matched_child_ids=matched,
            child_ids=[children.ids[r] for r in siblings[lo : hi + 1]],
            start=start,
            end=end,
        )
        return {
            **section,
            "id": children.ids[child] + WINDOW_SUFFIX,
            "text": text[start:end],
            "parent_id": self.parents.ids[parent],
        }

    @property
    def rows(self) -> int:
        """Rows one search scans."""
        return len(self.store)

    def _parent_index(self, children: RecordTable) -> npt.NDArray[np.intp]:
        """Parent row of each child row (-1 when unknown), and each parent's children in text
        order; recomputed when the store changes."""
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
            siblings: dict[int, list[int]] = {}
            for row, parent in enumerate(self._child_parent.tolist()):
                if parent >= 0:
                    siblings.setdefault(parent, []).append(row)
            for rows in siblings.values():
                rows.sort(key=lambda r: int(children.metadatas[r].get("start", 0)))
            self._siblings = siblings
            self._seen = children
        return self._child_parent
