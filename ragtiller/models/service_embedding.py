"""Drive a remote embedding service: batched calls, N in flight, a rate limit, retries, deadlines
(give the wrapped client no retries of its own: the driver must see each failure)."""

from __future__ import annotations

import email.utils
import json
import logging
import math
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from concurrent import futures
from dataclasses import dataclass
from typing import Any

from langchain_core.embeddings import Embeddings
from pydantic import SecretStr

from ragtiller.core.bulkhead import call_time_left, throttled
from ragtiller.core.providers import RateLimit, model_label, run_bounded
from ragtiller.core.retry import RetryPolicy
from ragtiller.errors import (
    ConfigurationError,
    EmbeddingError,
    EmbeddingServiceError,
    EmbeddingTimeoutError,
    Overloaded,
)

logger = logging.getLogger("ragtiller.models.service")

RETRY_STATUSES = frozenset({408, 409, 425, 429, 500, 502, 503, 504})  # any other fails at once
SERVICE_RETRY = RetryPolicy(attempts=6, base_delay_s=0.5, max_delay_s=30.0)


@dataclass
class ServiceStats:
    """What the driver has done so far, in every thread (``throttled``: HTTP 429 answers)."""

    calls: int = 0
    retries: int = 0
    throttled: int = 0
    timeouts: int = 0
    texts: int = 0


class ServiceEmbeddings(Embeddings):
    """Another ``Embeddings``' calls in batches, ``concurrency`` at a time in every thread, rate
    limited; ``Retry-After`` pauses every call. Its name is the wrapped one's (same fingerprint)."""

    def __init__(
        self,
        embedder: Embeddings,
        *,
        batch_size: int = 32,
        concurrency: int = 4,
        requests_per_s: float | None = None,
        texts_per_minute: float | None = None,
        timeout_s: float = 60.0,
        retry: RetryPolicy = SERVICE_RETRY,
        max_retry_after_s: float = 120.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        sizes = {"batch_size": batch_size, "concurrency": concurrency, "timeout_s": timeout_s}
        for name, value in sizes.items():
            if not value > 0:
                raise ConfigurationError(f"{name} must be > 0, but got {value}")
        self.embedder = embedder
        self.model = model_label(embedder)
        self.batch_size = batch_size
        self.concurrency = concurrency
        self.timeout_s = timeout_s
        self.retry = retry
        self.max_retry_after_s = max_retry_after_s
        self.rate = RateLimit(requests_per_s, texts_per_minute)
        self.stats = ServiceStats()
        self._sleep = sleep
        self._slots = threading.BoundedSemaphore(concurrency)
        self._lock = threading.Lock()
        self._dimension: int | None = None

    @property
    def dimension(self) -> int:
        if self._dimension is None:
            value = getattr(self.embedder, "dimension", None)
            if not (isinstance(value, int) and value > 0):
                value = len(self.embed_query("x"))
            self._dimension = value
        return self._dimension

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        starts = range(0, len(texts), self.batch_size)
        if len(starts) <= 1:
            return self._batch(texts, 0) if texts else []
        batches = run_bounded(
            lambda first: self._batch(texts[first : first + self.batch_size], first),
            starts,
            self.concurrency,
            "ragtiller-embed",
        )
        return [row for batch in batches for row in batch]

    def embed_query(self, text: str) -> list[float]:
        return self._with_retries(lambda: [self.embedder.embed_query(text)], 1, 0)[0]

    def _batch(self, batch: list[str], first: int) -> list[list[float]]:
        rows = self._with_retries(lambda: self.embedder.embed_documents(batch), len(batch), first)
        with self._lock:
            self.stats.texts += len(batch)
        return rows

    def _with_retries(
        self, call: Callable[[], list[list[float]]], count: int, first: int
    ) -> list[list[float]]:
        attempts = self.retry.attempts
        span = f"texts {first}-{first + count - 1}"
        for attempt in range(1, attempts + 1):
            try:
                rows = self._attempt(call, count)
            except Overloaded:  # throttled past the caller's deadline: not the service's fault
                raise
            except Exception as e:
                status, retry_after, retryable = classify(e)
                if not retryable or attempt == attempts:
                    tries = f"after {attempt} attempt{'s' if attempt != 1 else ''}"
                    message = f"embedding service {self.model!r} failed on {span} {tries}: {e}"
                    if isinstance(e, TimeoutError):
                        raise EmbeddingTimeoutError(message, status_code=None) from e
                    raise EmbeddingServiceError(message, status_code=status) from e
                delay = self.retry.delay(attempt)
                if retry_after is not None:
                    retry_after = min(retry_after, self.max_retry_after_s)
                    self.rate.pause(retry_after)
                    delay = max(delay, retry_after)
                with self._lock:
                    self.stats.retries += 1
                    self.stats.throttled += status == 429
                tried = f"attempt {attempt} of {attempts}, retrying in {delay:.2f} s"
                logger.warning(
                    "embedding service %r failed on %s (%s): %s", self.model, span, tried, e
                )
                self._sleep(delay)
                continue
            if len(rows) != count:
                raise EmbeddingError(
                    f"embedding service {self.model!r} returned {len(rows)} vectors for "
                    f"{count} texts ({span})"
                )
            return rows
        raise AssertionError("unreachable")  # pragma: no cover

    def _attempt(self, call: Callable[[], list[list[float]]], count: int) -> list[list[float]]:
        """One call in a daemon thread holding a slot until it ends, awaited until the deadline;
        on a bulkhead worker, waiting past the caller's deadline is :class:`Overloaded`."""
        with throttled():
            left = call_time_left()
            if not self._slots.acquire(timeout=None if left == math.inf else max(0.0, left)):
                raise Overloaded(
                    f"embedding service {self.model!r}: all {self.concurrency} slots busy "
                    "until the caller's deadline"
                )
            try:
                self.rate.acquire(count, max_wait_s=call_time_left())
            except BaseException:
                self._slots.release()
                raise
        answer: futures.Future[list[list[float]]] = futures.Future()

        def run() -> None:
            try:
                answer.set_result(call())
            except BaseException as e:  # handed to the waiting caller
                answer.set_exception(e)
            finally:
                self._slots.release()

        with self._lock:
            self.stats.calls += 1
        threading.Thread(target=run, name="ragtiller-embed-call", daemon=True).start()
        try:
            return answer.result(timeout=self.timeout_s)
        except futures.TimeoutError:
            with self._lock:
                self.stats.timeouts += 1
            raise EmbeddingTimeoutError(
                f"no answer within {self.timeout_s:g} s", status_code=None
            ) from None


def classify(error: BaseException) -> tuple[int | None, float | None, bool]:
    """The HTTP status, the ``Retry-After`` wait and whether another try can help, from what
    openai, cohere, httpx and requests attach."""
    response = getattr(error, "response", None)
    status = _int(getattr(error, "status_code", None))
    for source, attr in ((error, "status"), (response, "status_code"), (response, "status")):
        status = status if status is not None else _int(getattr(source, attr, None))
    retry_after = getattr(error, "retry_after_s", None)
    if retry_after is None:
        for source in (error, response):
            headers = getattr(source, "headers", None)
            if isinstance(headers, Mapping) or callable(getattr(headers, "get", None)):
                retry_after = retry_after_seconds(headers.get("retry-after"))  # type: ignore[union-attr]
            if retry_after is not None:
                break
    if status is not None:
        return status, retry_after, status in RETRY_STATUSES
    names = [cls.__name__ for cls in type(error).__mro__]
    transient = isinstance(error, TimeoutError | OSError | EmbeddingServiceError) or any(
        "Timeout" in name or "Connection" in name for name in names
    )
    return None, retry_after, transient


def retry_after_seconds(value: Any) -> float | None:
    """A ``Retry-After`` header value (seconds, or an HTTP date) as seconds from now."""
    if value is None:
        return None
    text = str(value).strip()
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class OpenAICompatibleEmbeddings(Embeddings):
    """A stdlib client of ``POST {base_url}/embeddings`` (TEI, vLLM, Infinity, LiteLLM, OpenAI):
    no SDK, one request per call, never retried (wrap it in :class:`ServiceEmbeddings`)."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | SecretStr | None = None,
        dimension: int | None = None,
        timeout_s: float = 60.0,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ConfigurationError(f"base_url must be an http(s) URL, but got {base_url!r}")
        if not model:
            raise ConfigurationError("model must name the service's embedding model")
        self.url = base_url.rstrip("/") + "/embeddings"
        self.model = model
        self.api_key = SecretStr(api_key) if isinstance(api_key, str) else api_key
        if dimension is not None:
            self.dimension = dimension
        self.timeout_s = timeout_s

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        answer = self._post({"model": self.model, "input": texts})
        try:
            data = sorted(answer["data"], key=lambda item: int(item["index"]))
            rows = [[float(x) for x in item["embedding"]] for item in data]
        except (KeyError, TypeError, ValueError) as e:
            raise EmbeddingError(f"{self.url} answered without data[].embedding: {e!r}") from e
        if len(rows) != len(texts):
            raise EmbeddingError(f"{self.url} returned {len(rows)} vectors for {len(texts)} texts")
        return rows

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]

    def _post(self, body: dict[str, Any]) -> Any:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key is not None:
            headers["Authorization"] = f"Bearer {self.api_key.get_secret_value()}"
        request = urllib.request.Request(
            self.url, data=json.dumps(body).encode(), headers=headers, method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as e:
            with e:  # closes the connection the error answer came on
                detail = e.read()[:200].decode("utf-8", "replace").strip()
            raise EmbeddingServiceError(
                f"{self.url} answered HTTP {e.code}: {detail or e.reason}",
                status_code=e.code,
                retry_after_s=retry_after_seconds(e.headers.get("retry-after")),
            ) from None
        except OSError as e:  # a URLError, a refused or dropped connection, a timeout
            reason = getattr(e, "reason", e)
            if isinstance(reason, TimeoutError):
                raise EmbeddingTimeoutError(
                    f"{self.url} did not answer within {self.timeout_s:g} s", status_code=None
                ) from e
            raise EmbeddingServiceError(
                f"{self.url} could not be reached: {reason}", status_code=None
            ) from e
        except json.JSONDecodeError as e:
            raise EmbeddingError(f"{self.url} answered with no JSON: {e}") from e
