"""A local reranker: a LangChain document compressor or a sentence-transformers cross-encoder."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any, Protocol, runtime_checkable

from langchain_core.documents import BaseDocumentCompressor, Document

from ragtiller.core.bulkhead import bulkhead_for, within
from ragtiller.core.tiers import Candidate
from ragtiller.errors import ConfigurationError
from ragtiller.rerankers.base import ModelReranker, Reranker, ZScoreReranker, order_by_scores

CANDIDATE_ID_KEY = "ragtiller_candidate_id"
"""Metadata key that carries a candidate's id through a document compressor."""


@runtime_checkable
class PairScorer(Protocol):
    """Anything scoring (query, text) pairs, like ``sentence_transformers.CrossEncoder``."""

    def predict(self, sentences: list[tuple[str, str]], /) -> Iterable[float]: ...


class CrossEncoderReranker(ModelReranker):
    """Reranks with a compressor (``acompress_documents``) or a ``predict(pairs)`` model (on its
    bulkhead); scores and fallbacks as docs/rerank.md says. ``timeout_s`` None waits."""

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
        self.floor = floor or ZScoreReranker()
        self.max_candidates = max_candidates
        self.timeout_s = timeout_s

    async def order(
        self, query: str, sent: list[Candidate], top_n: int
    ) -> tuple[list[Candidate], dict[str, Any]]:
        timeout_s = math.inf if self.timeout_s is None else self.timeout_s
        if isinstance(self.model, BaseDocumentCompressor):
            return await within(_compress(self.model, query, sent), timeout_s)
        pool = bulkhead_for(self.model, "reranker-cross-encoder")
        pairs = [(query, c["text"]) for c in sent]
        scores = await within(pool.call(self.model.predict, pairs, timeout_s=timeout_s), timeout_s)
        return order_by_scores(sent, list(scores)), {"score": "model"}


async def _compress(
    compressor: BaseDocumentCompressor, query: str, sent: list[Candidate]
) -> tuple[list[Candidate], dict[str, Any]]:
    """The candidates the compressor kept, scored by their ``relevance_score``, else ``1/rank``."""
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
            raise ValueError(f"compressor returned a document without a known {CANDIDATE_ID_KEY!r}")
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
