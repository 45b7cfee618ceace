"""Zero-LLM pseudo-relevance feedback: a tier's own top hits rewrite its query for a second pass.

RM3 (lexical): the terms of the first-pass top chunks, weighted by chunk score, are mixed with
the original query terms and BM25 scores every chunk again with those weights. Rocchio
(vectors): the query vector moves toward the mean vector of the first-pass top chunks. Both
cost one more in-memory pass over the tier and no model call. If the second pass fails, the
first-pass hits are returned with ``metadata["feedback"] = "failed: ..."`` (the turn goes on).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ragtiller.index._compute import CpuTier, top_k
from ragtiller.index.dense import NumpyVectorStore
from ragtiller.index.lexical import LexicalTier
from ragtiller.policies.schema import FeedbackConfig
from ragtiller.types import Hit, Tier


def rm3_weights(
    query_terms: Sequence[str],
    feedback: Sequence[tuple[Sequence[str], float]],
    *,
    n_terms: int,
    original_weight: float,
) -> dict[str, float]:
    """RM3 term weights: ``w * P(t|query) + (1 - w) * P(t|feedback)``, each part summing to 1.

    ``P(t|feedback)`` is the score-weighted mean of each feedback text's term frequencies
    (each text's counts normalised to sum 1), cut to the ``n_terms`` best terms and
    renormalised (Lavrenko and Croft's relevance model, as Anserini's RM3 computes it).

    Example:
        >>> w = rm3_weights(["wing"], [(["wing", "flutter"], 1.0)], n_terms=2, original_weight=0.5)
        >>> w["wing"], w["flutter"]
        (0.75, 0.25)
    """
    model: dict[str, float] = {}
    for terms, score in feedback:
        if not terms or score <= 0:
            continue
        for term, count in Counter(terms).items():
            model[term] = model.get(term, 0.0) + score * count / len(terms)
    # best first; equal weights by term, so the expansion does not depend on dict order
    expansion = sorted(model.items(), key=lambda kv: (-kv[1], kv[0]))[:n_terms]
    total = math.fsum(v for _, v in expansion)
    weights: dict[str, float] = {}
    if query_terms:
        for term, count in Counter(query_terms).items():
            weights[term] = original_weight * count / len(query_terms)
    for term, value in expansion:
        weights[term] = weights.get(term, 0.0) + (1.0 - original_weight) * value / total
    return weights


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


class RM3Tier(CpuTier):
    """A lexical tier searched twice: first as asked, then with RM3-expanded term weights."""

    needs_vector = False

    def __init__(self, inner: LexicalTier, config: FeedbackConfig) -> None:
        self.inner = inner
        self.name = inner.name
        self.config = config

    @property
    def rows(self) -> int:
        """Rows one search scans (twice)."""
        return self.inner.rows

    def search(
        self,
        *,
        query: str,
        vector: Sequence[float] | None,
        k: int,
        namespaces: Sequence[str] | None = None,
        filter: Mapping[str, Any] | None = None,
    ) -> list[Hit]:
        """At most ``k`` hits of the expanded query, best first."""
        first = self.inner.search(
            query=query, vector=vector, k=max(k, self.config.lexical_docs),
            namespaces=namespaces, filter=filter,
        )  # fmt: skip
        if not first:
            return first
        try:
            return self._second_pass(
                query, first[: self.config.lexical_docs], k, namespaces, filter
            )
        except Exception as e:  # feedback is an improvement, never a reason to lose the tier
            return [_mark(h, f"failed: {type(e).__name__}: {e}") for h in first[:k]]

    def _second_pass(
        self,
        query: str,
        top: list[Hit],
        k: int,
        namespaces: Sequence[str] | None,
        filter: Mapping[str, Any] | None,
    ) -> list[Hit]:
        tier = self.inner
        texts = [_indexed(h) for h in top]
        analysed = tier.analyse([query, *texts])
        weights = rm3_weights(
            analysed[0],
            list(zip(analysed[1:], (float(h["score"]) for h in top), strict=True)),
            n_terms=self.config.lexical_terms,
            original_weight=self.config.lexical_original_weight,
        )
        scores = tier.weighted_scores(weights)
        mask = tier.records.mask(namespaces, filter)
        if mask is not None:
            scores = np.where(mask, scores, np.float32(0))
        rows = np.flatnonzero(scores > 0)
        if not len(rows):
            return []
        best = rows[top_k(scores[rows], k)]
        return [tier.records.hit(r, scores[r], feedback="rm3") for r in best.tolist()]


class RocchioTier(CpuTier):
    """A vector tier searched with the query vector moved toward its first-pass top chunks.

    The first pass ranks the chunks of ``store`` (the dense tier's own vectors), so the dense and
    parent-child tiers move the same query the same way.
    """

    needs_vector = True

    def __init__(self, inner: Tier, store: NumpyVectorStore, config: FeedbackConfig) -> None:
        self.inner = inner
        self.name = inner.name
        self.store = store
        self.config = config

    @property
    def rows(self) -> int:
        """Rows one search scans (twice)."""
        return len(self.store)

    def search(
        self,
        *,
        query: str,
        vector: Sequence[float] | None,
        k: int,
        namespaces: Sequence[str] | None = None,
        filter: Mapping[str, Any] | None = None,
    ) -> list[Hit]:
        """At most ``k`` hits of the moved query vector, best first."""
        moved: Sequence[float] | None = vector
        status = "rocchio"
        if vector is not None:
            try:
                top = self.store.search_rows(
                    vector, self.config.dense_docs, namespaces=namespaces, filter=filter
                )
                if top:
                    rows = [row for row, _ in top]
                    moved = rocchio_vector(
                        vector, self.store.vectors[rows], weight=self.config.dense_weight
                    )
            except Exception as e:  # fall back to the plain query vector, labelled
                moved, status = vector, f"failed: {type(e).__name__}: {e}"
        hits = self.inner.search(
            query=query, vector=moved, k=k, namespaces=namespaces, filter=filter
        )
        return [_mark(h, status) for h in hits]


def _indexed(hit: Hit) -> str:
    title = hit["metadata"].get("title")
    return f"{title} {hit['text']}" if title else hit["text"]


def _mark(hit: Hit, status: str) -> Hit:
    return {**hit, "metadata": {**hit["metadata"], "feedback": status}}
