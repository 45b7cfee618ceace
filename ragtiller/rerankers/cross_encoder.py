"""A local reranker: a LangChain document compressor or a sentence-transformers cross-encoder."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any, Protocol, runtime_checkable

from langchain_core.documents import BaseDocumentCompressor, Document

from ragtiller.core.bulkhead import bulkhead_for, within
from ragtiller.core.tiers import Candidate
from ragtiller.errors import ConfigurationError
from ragtiller.rerankers._common import BaseReranker, fall_back, order_by_scores
from ragtiller.rerankers.base import Reranker, RerankResult
from ragtiller.rerankers.floor import ZScoreReranker

CANDIDATE_ID_KEY = "ragtiller_candidate_id"
"""Metadata key that carries a candidate's id through a document compressor."""


@runtime_checkable
class PairScorer(Protocol):
    """Anything scoring (query, text) pairs, like ``sentence_transformers.CrossEncoder``."""

    def predict(self, sentences: list[tuple[str, str]], /) -> Iterable[float]:
        """One relevance score per pair, higher is better."""
        ...


class CrossEncoderReranker(BaseReranker):
    """Reranks with a local model; falls back to ``floor`` (with ``error`` set) on any failure.

    ``model`` is either a LangChain :class:`~langchain_core.documents.BaseDocumentCompressor`
    (called with ``acompress_documents``; each ``Document`` carries the candidate id in
    ``metadata["ragtiller_candidate_id"]``) or an object with ``predict(pairs)`` such as
    ``sentence_transformers.CrossEncoder`` (run in a worker thread, so the event loop is free).

    ``final_score``: the model's own score for ``predict`` models; for compressors, the
    ``relevance_score`` each returned document carries in its metadata, or ``1 / rank`` when
    any document lacks one. Candidates a compressor leaves out are left out of the result (the
    compressor judged them irrelevant); ``detail["dropped"]`` counts them.

    Args:
        model: The compressor or pair scorer.
        floor: Used when the model fails; default :class:`ZScoreReranker`.
        max_candidates: Candidates sent to the model at most (the first ones in the input
            order); ``None`` sends all.
        timeout_s: Time allowed for one call, in seconds; ``None`` waits.

    Raises:
        ConfigurationError: When ``model`` is neither a compressor nor has ``predict``.

    Example:
        >>> from ragtiller.rerankers import CrossEncoderReranker
        >>> class Lengths:
        ...     def predict(self, pairs):
        ...         return [float(len(text)) for _, text in pairs]
        >>> CrossEncoderReranker(Lengths()).name
        'cross-encoder'
    """

    name = "cross-encoder"

    def __init__(
        self,
        model: BaseDocumentCompressor | PairScorer,
        *,
        floor: Reranker | None = None,
        max_candidates: int | None = None,
        timeout_s: float | None = None,
    ) -> None:
        if not isinstance(model, BaseDocumentCompressor | PairScorer):
            raise ConfigurationError(
                f"cross-encoder model must be a LangChain BaseDocumentCompressor or have "
                f".predict(pairs), but got {type(model).__name__}"
            )
        self.model = model
        self.floor: Reranker = floor or ZScoreReranker()
        self.max_candidates = max_candidates
        self.timeout_s = timeout_s

    async def arerank(
        self, query: str, candidates: Sequence[Candidate], top_n: int
    ) -> RerankResult:
        """Return the model's best ``top_n`` candidates for ``query``; never raise."""
        sent = list(candidates[: self.max_candidates])
        detail: dict[str, Any] = {"provider": self.name, "candidates_sent": len(sent)}
        if not sent or top_n <= 0:
            return RerankResult([], self.name, detail)
        try:
            ordered, extra = await within(self._score(query, sent), self._timeout_s)
        except Exception as e:
            return await fall_back(
                self.name, self.floor, e, query, candidates, top_n, detail=detail
            )
        return RerankResult(ordered[:top_n], self.name, {**detail, **extra})

    @property
    def _timeout_s(self) -> float:
        return math.inf if self.timeout_s is None else self.timeout_s

    async def _score(
        self, query: str, sent: list[Candidate]
    ) -> tuple[list[Candidate], dict[str, Any]]:
        if isinstance(self.model, BaseDocumentCompressor):
            return await self._compress(self.model, query, sent)
        pool = bulkhead_for(self.model, "reranker-cross-encoder")
        pairs = [(query, c["text"]) for c in sent]
        scores = await pool.call(self.model.predict, pairs, timeout_s=self._timeout_s)
        return order_by_scores(sent, list(scores)), {"score": "model"}

    @staticmethod
    async def _compress(
        compressor: BaseDocumentCompressor, query: str, sent: list[Candidate]
    ) -> tuple[list[Candidate], dict[str, Any]]:
        documents = [
            Document(page_content=c["text"], metadata={**c["metadata"], CANDIDATE_ID_KEY: c["id"]})
            for c in sent
        ]
        returned = await compressor.acompress_documents(documents, query)
        by_id = {c["id"]: c for c in sent}
        kept: list[Candidate] = []
        relevance: list[Any] = []
        for doc in returned:
            cid = doc.metadata.get(CANDIDATE_ID_KEY)
            if cid not in by_id:
                raise ValueError(
                    f"compressor returned a document without a known {CANDIDATE_ID_KEY!r}"
                )
            if all(c["id"] != cid for c in kept):
                kept.append(by_id[cid])
                relevance.append(doc.metadata.get("relevance_score"))
        use_relevance = all(isinstance(r, int | float) and math.isfinite(r) for r in relevance)
        scores = (
            [float(r) for r in relevance]
            if use_relevance
            else [1.0 / i for i in range(1, len(kept) + 1)]
        )
        extra = {
            "score": "relevance_score" if use_relevance else "rank",
            "dropped": len(sent) - len(kept),
        }
        return order_by_scores(kept, scores), extra
