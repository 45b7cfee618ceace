"""Neighbour score regularization: a passage's fused score, pulled toward its neighbours' scores.

The cluster hypothesis: closely related texts tend to be relevant to the same requests. A
relevant passage that both tiers scored a little low usually has relevant neighbours that
scored well, and an off-topic outlier has none. Following Diaz (2005, "Regularizing ad hoc
retrieval scores"), each of the best ``depth`` fused passages gets

    (1 - weight) * its fused score + weight * the mean fused score of its k nearest neighbours

among them, the neighbours by the cosine of their dense vectors and weighed by it. It reads the
corpus's own geometry, not a constant fitted to one collection. Documents rank by their best
regularized passage (``fusion.neighbour_weight``); the passages a document shows, and their
order, are the fused ones: a neighbour's score is evidence for a document, not for which of its
passages answers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ragtiller.core.tiers import Candidate, SearchRequest, wrapper_chain
from ragtiller.ranking.documents import DocKey, doc_key

VectorLookup = Callable[[Sequence[str]], tuple[list[str], npt.NDArray[np.float32]]]
"""Ids -> (those found, their unit vectors as rows): the dense tier's own, in the turn's scope."""


def regularize(
    scores: npt.ArrayLike, vectors: npt.ArrayLike, *, weight: float, k: int
) -> npt.NDArray[np.float64]:
    """Each score mixed with the cosine-weighted mean score of its ``k`` nearest neighbours.

    A row whose neighbours all have a cosine <= 0 keeps its own score (nothing to borrow).

    Example:
        >>> vectors = [[1.0, 0.0], [0.96, 0.28], [0.0, 1.0]]
        >>> regularize([1.0, 0.0, 0.5], vectors, weight=0.5, k=1).round(3).tolist()
        [0.5, 0.5, 0.25]
    """
    own = np.asarray(scores, dtype=np.float64)
    n = len(own)
    if n < 2 or weight == 0:
        return own.copy()
    unit = np.asarray(vectors, dtype=np.float64)
    # einsum, not `@`: for a 50 x 50 product OpenBLAS wakes its threads, which then spin
    # for milliseconds after the call (about 10 ms of CPU a turn, measured; wall time alike)
    cosine = np.einsum("ik,jk->ij", unit, unit)
    np.fill_diagonal(cosine, -np.inf)
    k = min(k, n - 1)
    nearest = np.argpartition(-cosine, k - 1, axis=1)[:, :k]
    affinity = np.take_along_axis(cosine, nearest, axis=1).clip(min=0.0)
    total = affinity.sum(axis=1)
    borrowed = (affinity * own[nearest]).sum(axis=1) / np.where(total > 0, total, 1.0)
    borrowed = np.where(total > 0, borrowed, own)
    return (1.0 - weight) * own + weight * borrowed


def neighbour_document_order(
    fused: Sequence[Candidate],
    vectors_of: VectorLookup,
    *,
    weight: float,
    k: int,
    depth: int,
) -> tuple[list[DocKey], int]:
    """Documents by their best regularized passage among the best ``depth`` fused passages,
    then the rest in fused order; and how many passages were regularized.

    Passages whose vector the lookup does not return keep their fused score. ``fused`` is
    best first and is not changed.
    """
    head = list(fused[:depth])
    found, block = vectors_of([c["id"] for c in head]) if len(head) > 1 else ([], None)
    own = np.array([c["fused_score"] for c in head], dtype=np.float64)
    smoothed = own.copy()
    regularized = 0
    if block is not None and len(found) > 1:
        at = {cid: i for i, cid in enumerate(c["id"] for c in head)}
        rows = [at[cid] for cid in found]
        smoothed[rows] = regularize(own[rows], block, weight=weight, k=k)
        regularized = len(rows)
    order = sorted(range(len(head)), key=lambda i: -smoothed[i])  # stable: ties keep fused order
    ranked = [doc_key(head[i]) for i in order] + [doc_key(c) for c in fused[depth:]]
    return list(dict.fromkeys(ranked)), regularized


def vector_lookup(tier: Any, request: SearchRequest) -> VectorLookup | None:
    """The vectors ``tier`` keeps in memory (through its wrappers: deadlines, Rocchio), read in
    the scope of the request it searched with; None when it keeps none here (a LangChain
    store; Pinecone's are fetched for the turn, :func:`remote_vectors`)."""
    keeper = next(
        (t for t in wrapper_chain(tier) if callable(getattr(t, "vectors_of", None))), None
    )
    if keeper is None:
        return None
    return lambda ids: keeper.vectors_of(request, ids)


def remote_vectors(tier: Any) -> Any | None:
    """The tier under ``tier``'s wrappers that fetches a turn's vectors from a server
    (``afetch_vectors(request, ids) -> VectorTable``, as Pinecone's does); None if none."""
    return next(
        (t for t in wrapper_chain(tier) if callable(getattr(t, "afetch_vectors", None))), None
    )


def failed_lookup(error: Exception) -> VectorLookup:
    """A lookup that raises ``error``: the neighbours report a fetch that failed as failed."""

    def lookup(ids: Sequence[str]) -> tuple[list[str], npt.NDArray[np.float32]]:
        raise error

    return lookup
