"""Redaction of provider error text: secrets go, the diagnosis stays."""

from __future__ import annotations

import time

import pytest

from ragtiller.core.redact import REDACTED, redact

OPENAI_KEY = "sk-proj-Q3vX9aB2cD4eF6gH8iJ0kL1mN3oP5qR7sT9uV1wX3yZ5aB7cD9eF1gH3iJ5kL7mN9"
PINECONE_KEY = "pcsk_4Hf7Kd_9Tx2QwErTyUi8Op3AsDfGh5JkLzXcVbNm1Q2W3e4R5t6Y7u8I9o0P"
COHERE_KEY = "Zk3P9qW2eR7tY4uI1oP6aS8dF0gH5jK2lZ9xC4vB"
UUID_KEY = "3b1f0e8a-7c2d-4e9f-a1b6-5d8c0f2e7a94"
GOOGLE_KEY = "AIzaSyD4x8Qw2Er5Ty7Ui9Op1As3Df5Gh7Jk9L"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"

CASES = [
    pytest.param(
        "Error code: 401 - {'error': {'message': 'Incorrect API key provided: "
        "sk-proj-abc1**************************************XtQA. You can find your API key at "
        "https://platform.openai.com/account/api-keys.', 'type': 'invalid_request_error', "
        "'param': None, 'code': 'invalid_api_key'}}",
        ["sk-proj-abc1", "XtQA"],
        ["Error code: 401", "Incorrect API key provided", "invalid_api_key", "account/api-keys"],
        id="openai-masked-key",
    ),
    pytest.param(
        f"openai.AuthenticationError: invalid key {OPENAI_KEY} for project p-123",
        [OPENAI_KEY, "Q3vX9aB2"],
        ["openai.AuthenticationError: invalid key", "for project p-123"],
        id="openai-full-key",
    ),
    pytest.param(
        "status_code: 401, body: {'message': 'invalid api token'}, "
        f"headers: {{'authorization': 'Bearer {COHERE_KEY}', 'x-client-name': 'ragtiller'}}",
        [COHERE_KEY],
        ["status_code: 401", "invalid api token", "'authorization': 'Bearer", "x-client-name"],
        id="cohere-header-dict",
    ),
    pytest.param(
        f"cohere.core.api_error.ApiError: token {COHERE_KEY} is not valid for rerank-english-v3.0",
        [COHERE_KEY],
        ["ApiError: token", "is not valid for rerank-english-v3.0"],
        id="cohere-bare-key",
    ),
    pytest.param(
        "(401)\nReason: Unauthorized\nHTTP response headers: HTTPHeaderDict({'Content-Type': "
        f"'text/plain', 'Api-Key': '{PINECONE_KEY}', 'x-pinecone-api-version': '2025-04'}})\n"
        "HTTP response body: Invalid API Key",
        [PINECONE_KEY, "4Hf7Kd"],
        ["(401)", "Reason: Unauthorized", "'Api-Key': '", "2025-04", "Invalid API Key"],
        id="pinecone-headers",
    ),
    pytest.param(
        f"PineconeApiException: legacy key {UUID_KEY} rejected by "
        "my-index-abc1234.svc.aped-4627-b74a.pinecone.io",
        [UUID_KEY],
        ["PineconeApiException: legacy key", "my-index-abc1234.svc.aped-4627-b74a.pinecone.io"],
        id="pinecone-legacy-uuid-key",
    ),
    pytest.param(
        f"curl -H 'Authorization: Bearer {JWT}' -H \"Api-Key: {PINECONE_KEY}\" failed",
        [JWT, PINECONE_KEY, "eyJhbGci"],
        ["Authorization: Bearer", "Api-Key:", "failed"],
        id="raw-headers",
    ),
    pytest.param(
        "HTTPSConnectionPool(host='generativelanguage.googleapis.com', port=443): Max retries "
        f"exceeded with url: /v1beta/models?key={GOOGLE_KEY}&alt=json (Caused by timeout)",
        [GOOGLE_KEY],
        ["port=443", "/v1beta/models?key=", "&alt=json", "(Caused by timeout)"],
        id="query-param-key",
    ),
    pytest.param(
        "POST /v1/embed?api_key=abc123&model=embed-v4 -> 403; retry with access_token=xyz&x=1",
        ["abc123", "xyz&"],
        ["/v1/embed?api_key=", "&model=embed-v4 -> 403", "&x=1"],
        id="short-param-values",
    ),
    pytest.param(
        '{"error": "bad request", "api_key": "short-but-secret", "password": "hunter2"}',
        ["short-but-secret", "hunter2"],
        ['"error": "bad request"', '"api_key": "', '"password": "'],
        id="json-fields",
    ),
    pytest.param(
        "Error 111 connecting to redis://:hunter2secret@redis.internal:6379/0. Connection refused.",
        ["hunter2secret"],
        ["Error 111 connecting to redis://", "@redis.internal:6379/0", "Connection refused."],
        id="url-password",
    ),
]


@pytest.mark.parametrize(("text", "gone", "kept"), CASES)
def test_secrets_go_and_the_diagnosis_stays(text: str, gone: list[str], kept: list[str]) -> None:
    cleaned = redact(text)
    assert REDACTED in cleaned
    for secret in gone:
        assert secret not in cleaned
    for part in kept:
        assert part in cleaned


@pytest.mark.parametrize(("text", "gone", "kept"), CASES)
def test_redacting_twice_changes_nothing_more(text: str, gone: list[str], kept: list[str]) -> None:
    once = redact(text)
    assert redact(once) == once


@pytest.mark.parametrize(
    "text",
    [
        "Connection refused",
        "no reply within 5.0s; 429 Too Many Requests, retry after 12 s",
        "index my-production-knowledge-base-index-2024 not found in project p-123",
        "max_tokens=4096 exceeds the limit of rerank-english-v3.0 (context 4096 tokens)",
        "Timeout reading from /usr/lib/python3.11/site-packages/ragtiller/stores/redis.py",
        "ValueError: a_very_long_snake_case_parameter_name_without_digits is required",
        "the key is missing",
        "",
    ],
)
def test_ordinary_error_text_is_left_alone(text: str) -> None:
    assert redact(text) == text


def test_lone_surrogates_pass_through() -> None:
    assert redact("no hits for 'lift \udcff' with key=\udcffabc") == (
        f"no hits for 'lift \udcff' with key={REDACTED}"
    )


@pytest.mark.parametrize(
    "text",
    [
        "a." * 50_000,
        "x-api-" * 20_000,
        "'" + "a-" * 50_000,
        "x://" + "a:" * 50_000,
        "eyJ-" * 25_000,
        "hello world " * 10_000 + "api_key=abc",
    ],
    ids=["dotted", "header-like", "quoted", "url-like", "jwt-like", "long-text"],
)
def test_redaction_stays_linear_on_hostile_text(text: str) -> None:
    # Not a speed figure: a guard against catastrophic backtracking, which took minutes on 40 kB
    # before every name and key was anchored to the start of its run.
    began = time.perf_counter()
    cleaned = redact(text)
    assert time.perf_counter() - began < 5
    assert cleaned.endswith("api_key=[REDACTED]") or REDACTED not in cleaned
