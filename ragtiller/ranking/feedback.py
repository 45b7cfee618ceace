"""Zero-LLM pseudo-relevance feedback: a tier's own top hits rewrite its query for a second pass.

RM3 (lexical): the terms of the first-pass top chunks, weighted by chunk score, are mixed with
the original query terms and BM25 scores every chunk again with those weights. Rocchio
(vectors): the query vector moves toward the mean vector of the first-pass top chunks, or, with
``dense_source: fused``, toward the best chunk of each of the top documents of the dense and
lexical first passes fused: documents both tiers agree on are better feedback than the dense
tier's guesses alone. RM3 costs one more pass over the tier; Rocchio re-scores only the first
pass's best ``dense_candidates`` chunks with the moved vector (``dense_rescore: candidates``), or
scans again (``full``), or, on an approximate tier, searches the HNSW graph again. Neither calls a
model. If the second pass fails, the first-pass hits are returned with ``metadata["feedback"] = "failed: ..."``
(the turn goes on).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import numpy.typing as npt

from ragtiller.core.tiers import Hit, Scored, SearchRequest, Tier
from ragtiller.index.compute import CpuTier, top_k_positive
from ragtiller.index.dense import NumpyVectorStore
from ragtiller.index.lexical import LexicalTier, indexed_text
from ragtiller.index.scans import SharedScans, scan_key
from ragtiller.models.batch_embedding import normalize_rows
from ragtiller.policies.schema import FeedbackConfig, FusionConfig
from ragtiller.ranking.documents import DocKey, doc_key
from ragtiller.ranking.fusion import fuse_scores

FUSED_FIRST_PASS_DEPTH = 100
"""Hits each first pass gives the fused feedback, whatever ``k`` the turn asks for: the feedback
documents, and so the ranking, do not change with the number of results asked for."""


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

    def search(self, request: SearchRequest) -> list[Hit]:
        """At most ``k`` hits of the expanded query, best first."""
        first = self.inner.search(replace(request, k=max(request.k, self.config.lexical_docs)))
        if not first:
            return first
        try:
            return self._second_pass(
                request.query,
                first[: self.config.lexical_docs],
                request.k,
                request.namespaces,
                request.filter,
            )
        except Exception as e:  # feedback is an improvement, never a reason to lose the tier
            return [_mark(h, f"failed: {type(e).__name__}: {e}") for h in first[: request.k]]

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
        best = top_k_positive(scores, k)
        marks = {"unit": tier.unit} if tier.unit else {}
        return [tier.records.hit(r, scores[r], feedback="rm3", **marks) for r in best.tolist()]


class RocchioTier(CpuTier):
    """A vector tier searched with the query vector moved toward feedback chunks.

    The feedback chunks are rows of ``store`` (the dense tier's own vectors), so the dense and
    parent-child tiers move the same query the same way. With ``dense_source: fused`` and a
    ``lexical`` tier, they are the best chunk of each top document of the fused first pass
    (see :func:`fused_feedback_rows`); otherwise the store's own top chunks.

    The second pass re-scores the first pass's best ``config.dense_candidates`` chunks with the
    moved vector when the inner tier can rank scored rows (``rank_scored``: the embedded dense
    and parent-child tiers) and ``config.dense_rescore`` is ``candidates``; otherwise the inner
    tier searches again with the moved vector (a full scan, or the HNSW graph when the inner
    tier is approximate, as the first pass then is too).
    """

    needs_vector = True

    def __init__(
        self,
        inner: Tier,
        store: NumpyVectorStore,
        config: FeedbackConfig,
        *,
        lexical: Tier | None = None,
        fusion: FusionConfig | None = None,
        first_passes: SharedScans | None = None,
        unit_vectors: Callable[[list[int]], np.ndarray] | None = None,
    ) -> None:
        self.inner = inner
        self.unit_vectors = unit_vectors
        self.name = inner.name
        self.store = store
        self.config = config
        fused = config.dense_source == "fused" and lexical is not None
        self.lexical = lexical if fused else None
        self.fusion = fusion or FusionConfig()
        self.label = "rocchio-fused" if fused else "rocchio"
        self.approximate = bool(getattr(inner, "approximate", False))
        """The first pass searches the store's HNSW graph (the inner tier does)."""
        rank = getattr(inner, "rank_scored", None)
        rescore = config.dense_rescore == "candidates" and not self.approximate
        self._rank_scored = rank if rescore and callable(rank) else None
        self._marks = bool(getattr(inner, "marks_question", False))
        """The inner tier can mark its hits with their question scores (``QUERY_SCORE``)."""
        # the dense and parent-child wrappers of one graph share it: one first pass per turn
        self.first_passes = first_passes or SharedScans()

    @property
    def rows(self) -> int:
        """Rows one search scans (twice)."""
        return len(self.store)

    def search(self, request: SearchRequest) -> list[Hit]:
        """At most ``k`` hits of the moved query vector, best first."""
        moved, status, candidates = self._moved(request)
        second = replace(request, vector=moved)
        marks = self._question_marks(request, moved)
        if moved is None or moved is request.vector or candidates is None or not self._rank_scored:
            hits = self.inner.search(second, **marks)
        else:
            query = normalize_rows(moved)[0]  # as a scan normalises it: the same cosines
            scores = self._rescored(candidates, query)
            hits = self._rank_scored(second, candidates, scores, **marks)
        return [_mark(h, status) for h in hits]

    def score_ids(self, request: SearchRequest, ids: Sequence[str]) -> dict[str, Scored]:
        """The moved query's cosine of each of ``ids`` in scope, as :meth:`search` scores it
        (with the question's own cosine where :meth:`search` marks it); empty when the inner
        tier cannot score given chunks. The feedback first pass is the turn's, kept."""
        score_ids = getattr(self.inner, "score_ids", None)
        if not callable(score_ids):
            return {}
        moved, _, _ = self._moved(request)
        scored: dict[str, Scored] = score_ids(
            replace(request, vector=moved), ids, **self._question_marks(request, moved)
        )
        return scored

    def _moved(
        self, request: SearchRequest
    ) -> tuple[Sequence[float] | None, str, npt.NDArray[np.intp] | None]:
        """The moved query vector, the feedback status, and the second pass's candidates."""
        moved: Sequence[float] | None = request.vector
        status = self.label
        candidates: npt.NDArray[np.intp] | None = None
        if request.vector is not None:
            try:
                rows, agreement, candidates = self._feedback_rows(request, request.vector)
                weight = self.config.dense_weight
                if self.config.dense_strength == "agreement" and self.lexical is not None:
                    weight *= agreement
                if rows and weight > 0.0:
                    vectors = self.unit_vectors or (lambda r: self.store.vectors[r])
                    moved = rocchio_vector(request.vector, vectors(rows), weight=weight)
            except Exception as e:  # fall back to the plain query vector, labelled
                moved, status = request.vector, f"failed: {type(e).__name__}: {e}"
                candidates = None
        return moved, status, candidates

    def _question_marks(
        self, request: SearchRequest, moved: Sequence[float] | None
    ) -> dict[str, Sequence[float]]:
        """``question=`` for the inner tier when a passage field reads the question's scores:
        a dense tier marks each chunk with its cosine to it (rows at hand, no lookup)."""
        wanted = "query" in (self.config.passage_scores, self.config.passage_positions)
        question = request.vector if wanted and moved is not request.vector else None
        return {"question": question} if question is not None and self._marks else {}

    def _rescored(
        self, candidates: npt.NDArray[np.intp], query: npt.NDArray[np.float32]
    ) -> npt.NDArray[np.float32]:
        """Cosines of the candidates with the moved ``query``, read-only; the dense and
        parent-child wrappers of one graph move the same query over the same candidates, so
        the second of them reads the first one's (``first_passes`` is shared)."""

        key = ("rescore", self.store.records, candidates.tobytes(), query.tobytes())
        return self.first_passes.get(
            key, lambda: candidate_cosines(self.store.vectors, candidates, query)
        )

    def _feedback_rows(
        self, request: SearchRequest, vector: Sequence[float]
    ) -> tuple[list[int], float, npt.NDArray[np.intp]]:
        """Feedback rows, how much the two first passes agree (1 without a fused pass), and the
        first pass's best ``dense_candidates`` rows (the second pass's candidates)."""
        lexical = self.lexical
        depth = FUSED_FIRST_PASS_DEPTH if lexical is not None else self.config.dense_docs
        wanted = max(depth, self.config.dense_candidates if self._rank_scored else depth)

        def first_pass() -> tuple[list[int], float, npt.NDArray[np.intp]]:
            rows, scores = self.store.nearest_rows(
                vector,
                wanted,
                namespaces=request.namespaces,
                filter=request.filter,
                approximate=self.approximate,
            )
            if lexical is None:
                return rows[: self.config.dense_docs].tolist(), 1.0, rows
            top = list(zip(rows[:depth].tolist(), scores[:depth].tolist(), strict=True))
            feedback, agreement = _fused(
                self.store, lexical, request, self.fusion, self.config.dense_docs, top
            )
            return feedback, agreement, rows

        key = scan_key(np.asarray(vector, dtype=np.float32), request.namespaces, request.filter)
        if key is None:
            return first_pass()
        # the record table is replaced whenever the store's rows change: rows kept for the old
        # table never answer for the new one (the key holds it, so its id stays unique); the
        # dense and parent-child wrappers of one graph share these, one first pass per turn
        return self.first_passes.get((self.store.records, key, request.query), first_pass)


def candidate_cosines(
    vectors: npt.NDArray[np.float32], rows: npt.NDArray[np.intp], query: npt.NDArray[np.float32]
) -> npt.NDArray[np.float32]:
    """Each row's inner product with the unit ``query``, read-only (shared, see ``_rescored``)."""
    block = np.asarray(vectors)[rows]  # a plain gather: a memmap's costs 1.6x
    scores: npt.NDArray[np.float32] = np.einsum("ij,j->i", block, query).astype(np.float32)
    scores.flags.writeable = False
    return scores


def fused_feedback_rows(
    store: NumpyVectorStore,
    lexical: Tier,
    request: SearchRequest,
    fusion: FusionConfig,
    *,
    docs: int,
) -> list[int]:
    """Store rows of the best chunk of each of the top ``docs`` documents of the fused first pass.

    The dense first pass (``store``) and the ``lexical`` one each give their top
    :data:`FUSED_FIRST_PASS_DEPTH` hits, collapsed to documents (a document's best score) and
    fused as ``fusion`` fuses a turn. A top document the dense first pass did not reach has no
    row to read; the next fused document takes its place.
    """
    return fused_feedback(store, lexical, request, fusion, docs=docs)[0]


def fused_feedback(
    store: NumpyVectorStore,
    lexical: Tier,
    request: SearchRequest,
    fusion: FusionConfig,
    *,
    docs: int,
) -> tuple[list[int], float]:
    """:func:`fused_feedback_rows` and the first passes' agreement (:func:`top_agreement`)."""
    if request.vector is None:
        return [], 0.0
    top = store.search_rows(
        request.vector,
        FUSED_FIRST_PASS_DEPTH,
        namespaces=request.namespaces,
        filter=request.filter,
    )
    return _fused(store, lexical, request, fusion, docs, top)


def _fused(
    store: NumpyVectorStore,
    lexical: Tier,
    request: SearchRequest,
    fusion: FusionConfig,
    docs: int,
    top: Sequence[tuple[int, float]],
) -> tuple[list[int], float]:
    """:func:`fused_feedback` from the dense first pass's ``top`` ``(row, cosine)`` pairs."""
    depth = FUSED_FIRST_PASS_DEPTH
    dense: dict[DocKey, float] = {}
    best_row: dict[DocKey, int] = {}
    records = store.records
    for row, score in top:  # best first: a document's first row is its best chunk
        key = records.document_key(row)
        if key not in dense:
            dense[key], best_row[key] = score, row
    lexical_docs: dict[DocKey, float] = {}
    if isinstance(lexical, LexicalTier):  # its rows, without building a hit per row
        found, scores = lexical.search_rows(replace(request, k=depth))
        for row, score in zip(found.tolist(), scores.tolist(), strict=True):
            lexical_docs.setdefault(lexical.records.document_key(row), score)
    else:
        for hit in lexical.search(replace(request, k=depth)):
            lexical_docs.setdefault(doc_key(hit), float(hit["score"]))
    fused = fuse_scores(
        {"dense": dense, lexical.name: lexical_docs},
        method=fusion.method,
        rrf_k=fusion.rrf_k,
        weights=fusion.tier_weights,
        margin=fusion.margin,
    )
    # ties: the dense order, then the lexical one (fuse_scores' dict order follows a set's, which
    # hash randomisation reorders from one process to the next)
    first: dict[DocKey, int] = {}
    for key in [*dense, *lexical_docs]:
        first.setdefault(key, len(first))
    ranked = sorted(fused, key=lambda key: (-fused[key], first[key]))
    rows = [best_row[key] for key in ranked if key in best_row][:docs]
    return rows, top_agreement(list(dense), list(lexical_docs))


AGREEMENT_DEPTH = 10
"""Documents of each first pass that :func:`top_agreement` compares."""


def top_agreement(first: Sequence[DocKey], second: Sequence[DocKey]) -> float:
    """Share of the top :data:`AGREEMENT_DEPTH` documents two best-first lists have in common.

    0 when either list is empty; a list shorter than the depth is compared as it is.

    Example:
        >>> top_agreement([("", "a"), ("", "b")], [("", "b"), ("", "c")])
        0.5
    """
    n = min(AGREEMENT_DEPTH, len(first), len(second))
    if n == 0:
        return 0.0
    return len(set(first[:n]) & set(second[:n])) / n


def _indexed(hit: Hit) -> str:
    return indexed_text(hit["text"], hit["metadata"])


def _mark(hit: Hit, status: str) -> Hit:
    return {**hit, "metadata": {**hit["metadata"], "feedback": status}}
