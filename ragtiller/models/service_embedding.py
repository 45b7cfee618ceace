"""Drive a remote embedding service: batched calls, N in flight, a rate limit, retries, deadlines.

:class:`ServiceEmbeddings` wraps any LangChain ``Embeddings`` that calls a service (OpenAI,
Cohere, a TEI or vLLM server through their LangChain classes, or
:class:`~ragtiller.models.http_embeddings.OpenAICompatibleEmbeddings`) and is itself an
``Embeddings``, so every ingest door takes it. Give the wrapped client no retries of its own
(``max_retries=0`` for the OpenAI and Cohere classes): the driver retries, and it has to see
each failure to honour ``Retry-After`` and keep to the rate limit.
"""

from __future__ import annotations

import email.utils
import logging
import math
import threading
import time
from collections.abc import Callable, Mapping
from concurrent import futures
from dataclasses import dataclass
from typing import Any

from langchain_core.embeddings import Embeddings

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

RETRY_STATUSES = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
"""HTTP statuses worth another try; any other status fails the call at once."""
SERVICE_RETRY = RetryPolicy(attempts=6, base_delay_s=0.5, max_delay_s=30.0)
"""Attempts per batch and their backoff (full jitter), unless ``Retry-After`` asks for longer."""


@dataclass
class ServiceStats:
    """What the driver has done so far (every call of every thread).

    Attributes:
        calls: Calls sent to the service, failed attempts included.
        retries: Calls that repeated a failed one.
        throttled: Answers with HTTP 429.
        timeouts: Calls abandoned at their deadline.
        texts: Texts embedded successfully.
    """

    calls: int = 0
    retries: int = 0
    throttled: int = 0
    timeouts: int = 0
    texts: int = 0


class ServiceEmbeddings(Embeddings):
    """An ``Embeddings`` that sends another one's calls in batches, ``concurrency`` at a time.

    ``embed_documents`` cuts its texts into batches of ``batch_size`` and sends up to
    ``concurrency`` of them at once; callers in several threads share the same bound, so the
    service never sees more than ``concurrency`` calls of this driver in flight (a call
    abandoned at its deadline keeps its place until it ends). Every call first waits for the
    rate limit. A call that fails with HTTP 408/409/425/429/5xx, a timeout or a lost connection
    is retried with backoff, waiting at least what a ``Retry-After`` header asks (and pausing
    every other call as long); any other status fails at once. Name and dimension are the
    wrapped embedder's, so wrapping changes no fingerprint: an index built without the driver
    is not re-embedded with it.

    Args:
        embedder: The service's LangChain ``Embeddings``, without retries of its own.
        batch_size: Texts per call.
        concurrency: Calls in flight at most.
        requests_per_s: Calls started per second at most; None: no limit.
        texts_per_minute: Texts sent per minute at most; None: no limit.
        timeout_s: Deadline of one call, from when it is sent.
        retry: Attempts and backoff per batch.
        max_retry_after_s: The longest ``Retry-After`` honoured; a longer one is cut to it.
        sleep: Waits between attempts (tests pass their own).

    Raises:
        ConfigurationError: ``batch_size``, ``concurrency`` or ``timeout_s`` is not positive,
            or a rate is not positive.

    Example:
        >>> from ragtiller.models import HashingEmbedder
        >>> driver = ServiceEmbeddings(HashingEmbedder(dim=8), batch_size=2, concurrency=2)
        >>> len(driver.embed_documents(["a", "b", "c"])), driver.stats.calls
        (3, 2)
    """

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
        for name, value in (
            ("batch_size", batch_size),
            ("concurrency", concurrency),
            ("timeout_s", timeout_s),
        ):
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
        """The wrapped embedder's dimension (asked once with one query when it names none)."""
        if self._dimension is None:
            value = getattr(self.embedder, "dimension", None)
            if not (isinstance(value, int) and value > 0):
                value = len(self.embed_query("x"))
            self._dimension = value
        return self._dimension

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """One vector per text, in order; batches run ``concurrency`` at a time.

        Raises:
            EmbeddingServiceError: A batch still failed after its attempts, or failed with a
                status not worth retrying (:class:`EmbeddingTimeoutError` when the last attempt
                timed out).
            EmbeddingError: The service returned a wrong number of vectors.
        """
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
        """The wrapped embedder's query vector, under the same bound, rate limit and retries."""
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
        for attempt in range(1, attempts + 1):
            try:
                rows = self._attempt(call, count)
            except Overloaded:  # throttled past the caller's deadline: not the service's fault
                raise
            except Exception as e:
                status, retry_after, retryable = classify(e)
                span = f"texts {first}-{first + count - 1}"
                if not retryable or attempt == attempts:
                    raise _final_error(self.model, span, attempt, status, e) from e
                delay = self.retry.delay(attempt)
                if retry_after is not None:
                    retry_after = min(retry_after, self.max_retry_after_s)
                    self.rate.pause(retry_after)
                    delay = max(delay, retry_after)
                with self._lock:
                    self.stats.retries += 1
                    self.stats.throttled += status == 429
                logger.warning(
                    "embedding service %r failed on %s (attempt %d of %d), retrying in %.2f s: %s",
                    self.model,
                    span,
                    attempt,
                    attempts,
                    delay,
                    e,
                )
                self._sleep(delay)
                continue
            if len(rows) != count:
                raise EmbeddingError(
                    f"embedding service {self.model!r} returned {len(rows)} vectors for "
                    f"{count} texts (texts {first}-{first + count - 1})"
                )
            return rows
        raise AssertionError("unreachable")  # pragma: no cover

    def _attempt(self, call: Callable[[], list[list[float]]], count: int) -> list[list[float]]:
        """One call in a daemon thread holding a slot until it ends, awaited until the deadline.

        On a bulkhead worker (a graph's query embedding) the waits for a slot and for the rate
        limit end by the caller's deadline, as :class:`Overloaded`, and count as queueing: a
        throttled call is not the service hanging.
        """
        with throttled():
            if not self._slots.acquire(timeout=_wait_s(call_time_left())):
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


def _wait_s(left: float) -> float | None:
    """A lock timeout for ``left`` seconds (None: no bound)."""
    return None if left == math.inf else max(0.0, left)


def classify(error: BaseException) -> tuple[int | None, float | None, bool]:
    """The HTTP status, the ``Retry-After`` wait and whether another try can help.

    Reads what the common clients attach: ``status_code`` or ``status`` on the error or on its
    ``response`` (openai, cohere, httpx, requests), headers on either, and ragtiller's
    :class:`EmbeddingServiceError`. Without a status, timeouts and lost connections (builtin
    ``TimeoutError``/``OSError``, or an exception class named ``...Timeout...`` or
    ``...Connection...``) are retried; anything else is not.
    """
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


def _final_error(
    model: str, span: str, attempts: int, status: int | None, error: Exception
) -> EmbeddingServiceError:
    tries = f"after {attempts} attempt{'s' if attempts != 1 else ''}"
    message = f"embedding service {model!r} failed on {span} {tries}: {error}"
    if isinstance(error, TimeoutError):
        return EmbeddingTimeoutError(message, status_code=None)
    return EmbeddingServiceError(message, status_code=status)


__all__ = (
    "RETRY_STATUSES",
    "SERVICE_RETRY",
    "ServiceEmbeddings",
    "ServiceStats",
    "classify",
    "retry_after_seconds",
)
