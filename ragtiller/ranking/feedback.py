"""Zero-LLM pseudo-relevance feedback (Rocchio), as pure steps over the turn's candidate table.

The fuse node runs them between the first pass and a second dense search: the dense and lexical
first passes' best :data:`FEEDBACK_DEPTH` passages are collapsed to documents (a document's best
score) and fused as ``fusion`` fuses a turn; the best dense passage of each of the top
``feedback.dense_docs`` documents is the feedback, and the question's vector moves toward their
mean (:func:`rocchio_vector`). The dense tier then searches again with the moved vector. No
model is called.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from ragtiller.core.tiers import Hit
from ragtiller.ranking.documents import DocKey, doc_key
from ragtiller.ranking.fusion import FusionMethod, fuse_scores
from ragtiller.ranking.table import CandidateTable

FEEDBACK_DEPTH = 100
"""Passages of each first pass the feedback reads, whatever ``k`` the turn asks for: the
feedback documents, and so the ranking, do not change with the number of results asked for."""


def rocchio_vector(query: Sequence[float], feedback: np.ndarray, *, weight: float) -> list[float]:
    """``q + weight * mean(feedback rows)``, unit length (cosine scoring ignores the scale).

    Example:
        >>> rocchio_vector([1.0, 0.0], np.array([[0.0, 1.0]]), weight=1.0)
        [0.7071067811865475, 0.7071067811865475]
    """
    q = np.asarray(query, dtype=np.float64)
    q = q / (np.linalg.norm(q) or 1.0)
    moved = q + weight * np.asarray(feedback, dtype=np.float64).mean(axis=0)
    norm = float(np.linalg.norm(moved))
    return (moved / norm if norm else q).tolist()  # type: ignore[no-any-return]


def feedback_passages(
    table: CandidateTable,
    dense: str,
    lexical: str | None,
    *,
    docs: int,
    method: FusionMethod,
    rrf_k: int,
    weights: Mapping[str, float] | None,
) -> list[str]:
    """Ids of the best ``dense`` passage of each of the top ``docs`` documents of the fused
    first pass: the best :data:`FEEDBACK_DEPTH` passages of the ``dense`` and ``lexical``
    tiers (None: the dense tier alone), collapsed to documents.

    A top document the dense first pass did not reach has no passage to read; the next fused
    document takes its place. Equal fused scores keep the dense order, then the other tiers'.

    Example:
        >>> def h(i, d, s):
        ...     return {"id": i, "text": "", "score": s, "doc_id": d, "parent_id": None,
        ...             "source": "", "metadata": {}}
        >>> table = CandidateTable({"dense": [h("a1", "A", .9), h("b1", "B", .8), h("a2", "A", .7)],
        ...                         "lexical": [h("b2", "B", 9.0), h("c1", "C", 1.0)]})
        >>> feedback_passages(table, "dense", "lexical", docs=1, method="rrf", rrf_k=60,
        ...                   weights=None)
        ['b1']
    """
    first = table.head(FEEDBACK_DEPTH).tiers
    names = [dense] if lexical is None or lexical not in first else [dense, lexical]
    scored = {tier: _documents(first[tier]) for tier in names}
    best: dict[DocKey, str] = {}
    for hit in first[dense]:
        best.setdefault(doc_key(hit), hit["id"])
    fused = fuse_scores(scored, method=method, rrf_k=rrf_k, weights=weights)
    order: dict[DocKey, int] = {}
    for tier in names:
        for key in scored[tier]:
            order.setdefault(key, len(order))
    ranked = sorted(fused, key=lambda key: (-fused[key], order[key]))
    return [best[key] for key in ranked if key in best][:docs]


def _documents(hits: Sequence[Hit]) -> dict[DocKey, float]:
    """Each document's best score among ``hits`` (best first), in order of its best hit."""
    out: dict[DocKey, float] = {}
    for hit in hits:
        out.setdefault(doc_key(hit), float(hit["score"]))
    return out
