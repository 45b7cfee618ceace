"""The Cohere provider through the real cohere SDK and langchain-cohere, against a loopback stub."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from fixtures.cohere_stub import CohereStub, StubMode
from fixtures.fakes import hit

from ragtiller.core.tiers import Candidate
from ragtiller.errors import ConfigurationError
from ragtiller.ranking.fusion import fuse_hits
from ragtiller.rerankers import CohereReranker, Reranker

KEY = "stub-key-0123456789"
QUERY = "How do I reset a forgotten password?"
TEXTS = {
    "a": "billing and invoices",
    "b": "reset your password from the login page",
    "c": "a forgotten password can be reset by email",
    "d": "password rules",
}


def candidates(texts: dict[str, str] = TEXTS) -> list[Candidate]:
    """Fusion order follows ``texts`` (dense scores descending)."""
    hits = [
        hit("dense", i, float(len(texts) - n), text=t) for n, (i, t) in enumerate(texts.items())
    ]
    return fuse_hits({"dense": hits}, method="rrf", cap=len(hits))


@pytest.fixture
def stub() -> Iterator[CohereStub]:
    with CohereStub(slow_s=5.0) as server:
        yield server


@pytest.fixture
def cohere(stub: CohereStub) -> Iterator[CohereReranker]:
    reranker = CohereReranker(api_key=KEY, base_url=stub.url, timeout_s=0.5, env={})
    yield reranker
    reranker.close()


async def test_success_orders_by_relevance_and_sends_the_query(
    stub: CohereStub, cohere: CohereReranker
) -> None:
    result = await cohere.arerank(QUERY, candidates(), top_n=3)

    # query tokens {how, do, i, reset, a, forgotten, password}: c has 4, b 2, d 1
    assert [c["id"] for c in result.candidates] == ["c", "b", "d"]
    assert [c["final_score"] for c in result.candidates] == pytest.approx([4 / 7, 2 / 7, 1 / 7])
    assert all(0.0 <= c["final_score"] <= 1.0 for c in result.candidates)
    assert result.method == "cohere"
    assert result.error is None
    assert result.detail == {"provider": "cohere", "model": "rerank-v3.5", "candidates_sent": 4}

    [request] = stub.requests
    assert request.path == "/v2/rerank"
    assert request.headers["Authorization"] == f"Bearer {KEY}"
    assert request.body["query"] == QUERY
    assert request.body["documents"] == list(TEXTS.values())
    assert request.body["model"] == "rerank-v3.5"
    assert request.body["top_n"] == 3


@pytest.mark.parametrize(
    ("mode", "kind", "error_start"),
    [
        ("429", "rate-limited", "HTTPStatusError: Client error '429 Too Many Requests'"),
        ("500", "server-error", "HTTPStatusError: Server error '500 Internal Server Error'"),
        ("slow", "timeout", "ReadTimeout"),
        ("malformed", "malformed-response", "ApiError"),
    ],
)
async def test_failures_fall_back_to_zscore_without_raising(
    stub: CohereStub,
    cohere: CohereReranker,
    caplog: pytest.LogCaptureFixture,
    mode: StubMode,
    kind: str,
    error_start: str,
) -> None:
    stub.mode = mode
    caplog.set_level(logging.DEBUG)

    result = await cohere.arerank(QUERY, candidates(), top_n=3)

    assert result.method == "zscore"
    assert result.error is not None and result.error.startswith(error_start)
    assert [c["id"] for c in result.candidates] == ["a", "b", "c"]  # the floor's order
    assert result.detail["fallback"] == "zscore"
    assert result.detail["error_kind"] == kind
    assert len(stub.requests) == 1  # the SDK's own retries (1 s, 2 s) are refused
    assert KEY not in repr(result) and KEY not in caplog.text


async def test_more_than_max_candidates_are_capped(
    stub: CohereStub, cohere: CohereReranker
) -> None:
    many = candidates({f"c{i:03d}": f"document {i} about password" for i in range(150)})
    result = await cohere.arerank("password", many, top_n=200)
    [body] = stub.rerank_bodies
    assert len(body["documents"]) == 100
    assert body["top_n"] == 100
    assert result.detail["candidates_sent"] == 100
    assert len(result.candidates) == 100
    assert {c["id"] for c in result.candidates} == {c["id"] for c in many[:100]}


async def test_missing_key_falls_back_without_a_request(stub: CohereStub) -> None:
    reranker = CohereReranker(base_url=stub.url, env={"COHERE_API_KEY": "  "})
    assert not reranker.has_credentials
    result = await reranker.arerank(QUERY, candidates(), top_n=2)
    assert result.method == "zscore"
    assert result.detail["error_kind"] == "no-credentials"
    assert result.error is not None and "COHERE_API_KEY" in result.error
    assert stub.requests == []


async def test_key_read_from_env_is_secret(stub: CohereStub) -> None:
    reranker = CohereReranker(base_url=stub.url, env={"COHERE_API_KEY": KEY})
    try:
        assert reranker.has_credentials
        assert KEY not in repr(reranker)
        result = await reranker.arerank(QUERY, candidates(), top_n=1)
    finally:
        reranker.close()
    assert result.method == "cohere"
    assert stub.requests[0].headers["Authorization"] == f"Bearer {KEY}"


async def test_empty_input_makes_no_request(stub: CohereStub, cohere: CohereReranker) -> None:
    assert (await cohere.arerank(QUERY, [], top_n=3)).candidates == []
    assert (await cohere.arerank(QUERY, candidates(), top_n=0)).candidates == []
    assert stub.requests == []


def test_sync_rerank_and_protocol(stub: CohereStub, cohere: CohereReranker) -> None:
    assert isinstance(cohere, Reranker)
    assert [c["id"] for c in cohere.rerank(QUERY, candidates(), top_n=1).candidates] == ["c"]


@pytest.mark.parametrize("bad", [0, 101])
def test_max_candidates_must_fit_one_search_unit(bad: int) -> None:
    with pytest.raises(
        ConfigurationError, match=rf"max_candidates must be in 1..100, but got {bad}"
    ):
        CohereReranker(max_candidates=bad, env={})
