"""The embedding-service driver against a loopback HTTP service: bound, rate, retries, deadline."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import ClassVar

import numpy as np
import pytest

from ragtiller.core.providers import RateLimit
from ragtiller.core.retry import RetryPolicy
from ragtiller.errors import (
    ConfigurationError,
    EmbeddingServiceError,
    EmbeddingTimeoutError,
    Overloaded,
)
from ragtiller.models import HashingEmbedder, OpenAICompatibleEmbeddings, ServiceEmbeddings
from ragtiller.models.service_embedding import classify, retry_after_seconds
from tests.fixtures.embedding_service import API_KEY, MODEL, EmbeddingServiceEmulator

DIM = 32
TEXTS = [f"text number {i} about topic {i % 7}" for i in range(40)]
NO_SLEEP = RetryPolicy(attempts=3, base_delay_s=0.0, max_delay_s=0.0)


@pytest.fixture
def service() -> Iterator[EmbeddingServiceEmulator]:
    with EmbeddingServiceEmulator(dimension=DIM) as emulator:
        yield emulator


def client(
    emulator: EmbeddingServiceEmulator, timeout_s: float = 60.0
) -> OpenAICompatibleEmbeddings:
    return OpenAICompatibleEmbeddings(
        emulator.base_url, MODEL, api_key=API_KEY, dimension=DIM, timeout_s=timeout_s
    )


def test_batches_run_concurrency_at_a_time_and_come_back_in_order() -> None:
    with EmbeddingServiceEmulator(dimension=DIM, latency_s=0.05) as service:
        driver = ServiceEmbeddings(client(service), batch_size=4, concurrency=3)
        rows = driver.embed_documents(TEXTS)
        assert rows == HashingEmbedder(dim=DIM).embed_documents(TEXTS)
        assert [len(r.texts) for r in service.requests] == [4] * 10
        assert service.max_in_flight == 3  # saturated, never beyond
        assert (driver.stats.calls, driver.stats.texts, driver.dimension) == (10, 40, DIM)


def test_callers_in_several_threads_share_one_bound() -> None:
    with EmbeddingServiceEmulator(dimension=DIM, latency_s=0.03) as service:
        driver = ServiceEmbeddings(client(service), batch_size=2, concurrency=2)
        threads = [
            threading.Thread(target=driver.embed_documents, args=(TEXTS[i::4],)) for i in range(4)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert service.max_in_flight == 2 and len(service.requests) == 20


def test_requests_per_second_hold_across_threads(service: EmbeddingServiceEmulator) -> None:
    rate = 20.0
    driver = ServiceEmbeddings(client(service), batch_size=1, concurrency=8, requests_per_s=rate)
    driver.embed_documents(TEXTS[:21])
    arrived = sorted(r.arrived for r in service.requests)
    jitter = 0.06  # a request reaches the server a little after its slot
    for i, start in enumerate(arrived):
        for j in range(i + 1, len(arrived)):
            assert arrived[j] - start >= (j - i) / rate - jitter, (i, j)
    assert arrived[-1] - arrived[0] >= 20 / rate - jitter


def test_texts_per_minute_hold(service: EmbeddingServiceEmulator) -> None:
    driver = ServiceEmbeddings(client(service), batch_size=5, concurrency=4, texts_per_minute=3000)
    driver.embed_documents(TEXTS[:30])  # 6 calls of 5 texts: one every 0.1 s
    arrived = sorted(r.arrived for r in service.requests)
    assert len(arrived) == 6 and arrived[-1] - arrived[0] >= 0.5 - 0.06


def test_a_429_waits_its_retry_after_and_pauses_every_call(
    service: EmbeddingServiceEmulator,
) -> None:
    service.fail(429, times=1, retry_after="1")
    driver = ServiceEmbeddings(client(service), batch_size=1, concurrency=1)
    assert driver.embed_documents(TEXTS[:3]) == HashingEmbedder(dim=DIM).embed_documents(TEXTS[:3])
    first, *rest = service.requests
    assert first.status == 429 and [r.status for r in rest] == [200, 200, 200]
    assert rest[0].texts == first.texts and rest[0].arrived - first.ended >= 1.0
    assert (driver.stats.throttled, driver.stats.retries) == (1, 1)


def test_5xx_is_retried_and_4xx_fails_at_once(service: EmbeddingServiceEmulator) -> None:
    service.fail(500, times=2)
    driver = ServiceEmbeddings(client(service), batch_size=8, retry=NO_SLEEP)
    assert len(driver.embed_documents(TEXTS[:8])) == 8
    assert [r.status for r in service.requests] == [500, 500, 200]

    service.requests.clear()
    service.fail(400)
    with pytest.raises(
        EmbeddingServiceError, match=r"on texts 0-7 after 1 attempt: .*HTTP 400"
    ) as e:
        driver.embed_documents(TEXTS[:8])
    assert e.value.status_code == 400 and len(service.requests) == 1


def test_a_lasting_outage_fails_after_the_attempts_naming_the_texts(
    service: EmbeddingServiceEmulator,
) -> None:
    service.fail(503, times=10)
    driver = ServiceEmbeddings(client(service), batch_size=4, concurrency=1, retry=NO_SLEEP)
    with pytest.raises(EmbeddingServiceError, match=r"texts 0-3 after 3 attempts") as e:
        driver.embed_documents(TEXTS[:8])
    assert e.value.status_code == 503
    assert len(service.requests) == 3  # the second batch was never sent


def test_a_slow_call_is_abandoned_at_its_deadline_but_keeps_its_slot(
    service: EmbeddingServiceEmulator,
) -> None:
    service.slow(1.5)
    driver = ServiceEmbeddings(
        client(service, timeout_s=10.0), batch_size=4, concurrency=1, timeout_s=0.3, retry=NO_SLEEP
    )
    assert len(driver.embed_documents(TEXTS[:4])) == 4
    slow, retried = service.requests[0], service.requests[1]
    assert driver.stats.timeouts == 1 and retried.texts == slow.texts
    assert retried.arrived >= slow.ended - 0.01  # the one slot was held until the slow call ended
    assert service.max_in_flight == 1


def test_the_deadline_error_when_every_attempt_times_out(
    service: EmbeddingServiceEmulator,
) -> None:
    service.slow(0.5, times=2)
    driver = ServiceEmbeddings(
        client(service), timeout_s=0.1, retry=RetryPolicy(attempts=2, base_delay_s=0.0)
    )
    with pytest.raises(EmbeddingTimeoutError, match=r"after 2 attempts: no answer within 0.1 s"):
        driver.embed_query("q")


def test_unreachable_service_and_bad_key_are_named(service: EmbeddingServiceEmulator) -> None:
    bad_key = OpenAICompatibleEmbeddings(service.base_url, MODEL, api_key="wrong")
    with pytest.raises(EmbeddingServiceError, match="HTTP 401"):
        ServiceEmbeddings(bad_key, retry=NO_SLEEP).embed_documents(["a"])
    nowhere = OpenAICompatibleEmbeddings("http://127.0.0.1:9/v1", MODEL)
    with pytest.raises(EmbeddingServiceError, match="could not be reached") as e:
        ServiceEmbeddings(nowhere, retry=NO_SLEEP).embed_documents(["a"])
    assert e.value.status_code is None and "after 3 attempts" in str(e.value)


def test_langchain_openai_embeddings_are_driven_the_same_way(
    service: EmbeddingServiceEmulator,
) -> None:
    """A LangChain class of a real SDK: its RateLimitError's Retry-After is read and honoured."""
    langchain_openai = pytest.importorskip("langchain_openai")
    openai = langchain_openai.OpenAIEmbeddings(
        model=MODEL,
        base_url=service.base_url,
        api_key=API_KEY,
        max_retries=0,
        check_embedding_ctx_length=False,
    )
    service.fail(429, times=1, retry_after="0.5")
    driver = ServiceEmbeddings(openai, batch_size=5, concurrency=2)
    rows = driver.embed_documents(TEXTS[:10])
    assert np.allclose(rows, HashingEmbedder(dim=DIM).embed_documents(TEXTS[:10]), atol=1e-6)
    throttled = next(r for r in service.requests if r.status == 429)
    retry = next(r for r in service.requests if r.texts == throttled.texts and r.status == 200)
    assert retry.arrived - throttled.ended >= 0.5 and driver.stats.throttled == 1


def test_classify_reads_status_and_retry_after_of_common_errors() -> None:
    class Response:
        status_code = 503
        headers: ClassVar[dict[str, str]] = {"retry-after": "2"}

    class ApiError(Exception):
        response = Response()

    class APIConnectionError(Exception):
        pass

    assert classify(ApiError()) == (503, 2.0, True)
    assert classify(EmbeddingServiceError("x", status_code=422)) == (422, None, False)
    assert classify(APIConnectionError()) == (None, None, True)
    assert classify(TimeoutError()) == (None, None, True)
    assert classify(ValueError("bad json")) == (None, None, False)
    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # a date in the past
    assert retry_after_seconds("soon") is None


def test_settings_are_checked() -> None:
    with pytest.raises(ConfigurationError, match="concurrency must be > 0"):
        ServiceEmbeddings(HashingEmbedder(dim=4), concurrency=0)
    with pytest.raises(ConfigurationError, match="requests_per_s must be > 0"):
        RateLimit(requests_per_s=0)
    with pytest.raises(ConfigurationError, match="base_url must be an http"):
        OpenAICompatibleEmbeddings("tei:8080", MODEL)


def test_a_rate_limit_reserves_no_slot_a_caller_cannot_wait_for() -> None:
    now = [0.0]
    limit = RateLimit(requests_per_s=2.0, clock=lambda: now[0], sleep=lambda s: None)
    assert limit.acquire() == 0.0
    with pytest.raises(Overloaded, match="past the caller's deadline"):
        limit.acquire(max_wait_s=0.4)  # its slot is 0.5 s away
    assert limit.acquire(max_wait_s=0.5) == 0.5  # the refused call took no slot
    assert limit.acquire() == 1.0
