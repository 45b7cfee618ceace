"""The cross-encoder provider with a fake LangChain compressor and a fake ``predict`` model."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pytest
from fixtures.cohere_stub import overlap_score
from fixtures.fakes import hit
from langchain_core.callbacks import Callbacks
from langchain_core.documents import BaseDocumentCompressor, Document

from ragtiller.core.tiers import Candidate
from ragtiller.errors import ConfigurationError
from ragtiller.ranking.fusion import fuse_hits
from ragtiller.rerankers import CANDIDATE_ID_KEY, CrossEncoderReranker, IdentityReranker

QUERY = "reset a forgotten password"
TEXTS = {
    "a": "billing and invoices",
    "b": "reset your password from the login page",
    "c": "a forgotten password can be reset by email",
    "d": "password rules",
}


def candidates() -> list[Candidate]:
    """Fusion order a, b, c, d (dense scores descending)."""
    hits = [hit("dense", i, 4.0 - n, text=TEXTS[i]) for n, i in enumerate(TEXTS)]
    return fuse_hits({"dense": hits}, method="rrf", cap=10)


class OverlapCompressor(BaseDocumentCompressor):
    """Scores by token overlap, puts ``relevance_score`` in metadata, drops score-0 documents."""

    with_scores: bool = True

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        scored = [(overlap_score(query, d.page_content), d) for d in documents]
        kept = sorted((s for s in scored if s[0] > 0), key=lambda s: -s[0])
        if not self.with_scores:
            return [d for _, d in kept]
        return [
            Document(d.page_content, metadata={**d.metadata, "relevance_score": s}) for s, d in kept
        ]


class IdLosingCompressor(BaseDocumentCompressor):
    """Returns documents stripped of their metadata (so without the candidate id)."""

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        return [Document(d.page_content) for d in documents]


class OverlapModel:
    """A ``CrossEncoder`` look-alike: ``predict(pairs)`` returns a numpy array."""

    def __init__(self) -> None:
        self.pairs: list[tuple[str, str]] = []

    def predict(self, pairs: list[tuple[str, str]]) -> Any:
        self.pairs.extend(pairs)
        return np.array([overlap_score(q, t) * 10 - 2 for q, t in pairs])


async def test_compressor_relevance_scores_order_and_drop() -> None:
    result = await CrossEncoderReranker(OverlapCompressor()).arerank(QUERY, candidates(), top_n=5)
    # query tokens {reset, a, forgotten, password}: c has all 4, b 2 (reset, password), d 1
    assert [c["id"] for c in result.candidates] == ["c", "b", "d"]
    assert [c["final_score"] for c in result.candidates] == pytest.approx([1.0, 0.5, 0.25])
    assert result.method == "cross-encoder"
    assert result.error is None
    assert result.detail["score"] == "relevance_score"
    assert result.detail["dropped"] == 1
    assert CANDIDATE_ID_KEY not in result.candidates[0]["metadata"]


async def test_compressor_without_scores_gets_rank_scores() -> None:
    reranker = CrossEncoderReranker(OverlapCompressor(with_scores=False))
    result = await reranker.arerank(QUERY, candidates(), top_n=2)
    assert [c["id"] for c in result.candidates] == ["c", "b"]
    assert [c["final_score"] for c in result.candidates] == [1.0, 0.5]
    assert result.detail["score"] == "rank"


async def test_compressor_losing_ids_falls_back_to_the_floor() -> None:
    result = await CrossEncoderReranker(IdLosingCompressor()).arerank(QUERY, candidates(), top_n=2)
    assert result.method == "zscore"
    assert result.error is not None and "ragtiller_candidate_id" in result.error
    assert result.detail["fallback"] == "zscore"
    assert result.detail["error_kind"] == "malformed-response"


async def test_predict_model_scores_pairs_of_the_query() -> None:
    model = OverlapModel()
    result = await CrossEncoderReranker(model, max_candidates=3).arerank(QUERY, candidates(), 2)
    assert model.pairs == [(QUERY, TEXTS[i]) for i in ("a", "b", "c")]
    assert [c["id"] for c in result.candidates] == ["c", "b"]
    assert [c["final_score"] for c in result.candidates] == pytest.approx([8.0, 3.0])
    assert result.detail["candidates_sent"] == 3
    assert isinstance(result.candidates[0]["final_score"], float)


class BrokenModel:
    def __init__(self, answer: Any) -> None:
        self.answer = answer

    def predict(self, pairs: list[tuple[str, str]]) -> Any:
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


@pytest.mark.parametrize(
    ("answer", "error_start"),
    [
        (RuntimeError("CUDA out of memory"), "RuntimeError: CUDA out of memory"),
        ([0.1, 0.2], "ValueError: expected 4 scores, but got 2"),
        ([0.1, float("nan"), 0.3, 0.4], "ValueError: scores must be finite"),
    ],
)
async def test_predict_failures_fall_back_without_raising(answer: Any, error_start: str) -> None:
    result = await CrossEncoderReranker(BrokenModel(answer)).arerank(QUERY, candidates(), 4)
    assert result.error is not None and result.error.startswith(error_start)
    assert result.method == "zscore"
    assert len(result.candidates) == 4


@pytest.fixture
def gate() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()  # let the stalled worker thread finish before the loop closes


async def test_timeout_falls_back_to_a_given_floor(gate: threading.Event) -> None:
    class Stalling:
        def predict(self, pairs: list[tuple[str, str]]) -> list[float]:
            gate.wait(5)
            return [0.0] * len(pairs)

    reranker = CrossEncoderReranker(Stalling(), floor=IdentityReranker(), timeout_s=0.05)
    result = await reranker.arerank(QUERY, candidates(), 2)
    assert result.method == "identity"
    assert result.detail["error_kind"] == "timeout"
    assert result.error == "DeadlineExceeded: no answer within 0.05s"


def test_model_without_predict_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="must be a LangChain BaseDocumentCompressor"):
        CrossEncoderReranker(object())  # type: ignore[arg-type]
