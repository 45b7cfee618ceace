"""A minimal client of an OpenAI-compatible ``POST /v1/embeddings`` endpoint, on the stdlib.

For self-hosted servers that speak that API (Hugging Face TEI, vLLM, Infinity, llama.cpp's
server, LiteLLM, OpenAI itself) without installing an SDK. It makes exactly one HTTP request
per call and never retries: wrap it in :class:`~ragtiller.models.service_embedding.ServiceEmbeddings`
for batching, concurrency, a rate limit and retries.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from langchain_core.embeddings import Embeddings
from pydantic import SecretStr

from ragtiller.errors import (
    ConfigurationError,
    EmbeddingError,
    EmbeddingServiceError,
    EmbeddingTimeoutError,
)
from ragtiller.models.service_embedding import retry_after_seconds


class OpenAICompatibleEmbeddings(Embeddings):
    """Embeds with ``POST {base_url}/embeddings``, body ``{"model": ..., "input": [texts]}``.

    The answer's ``data[i].embedding`` vectors are returned in ``data[i].index`` order. An
    error status raises :class:`EmbeddingServiceError` with the status and ``Retry-After``; no
    answer within ``timeout_s`` raises :class:`EmbeddingTimeoutError`; a refused or dropped
    connection raises :class:`EmbeddingServiceError` without a status.

    Args:
        base_url: The API root, e.g. ``http://tei:8080/v1`` (``/embeddings`` is appended).
        model: The model name sent with each request (and the embedder's name in manifests
            and fingerprints).
        api_key: Sent as ``Authorization: Bearer``; None sends none. Held as a ``SecretStr``.
        dimension: The vectors' dimension, when known (else asked once with one query).
        timeout_s: Socket timeout of one request, in seconds.

    Raises:
        ConfigurationError: ``base_url`` is not an http(s) URL or ``model`` is empty.

    Example:
        >>> client = OpenAICompatibleEmbeddings("http://127.0.0.1:8080/v1", "bge-small-en")
        >>> client.url, client.model
        ('http://127.0.0.1:8080/v1/embeddings', 'bge-small-en')
    """

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
        """One request for all ``texts``; vectors in input order."""
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
        """The vector of one text (the same request as a document's)."""
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
        except TimeoutError as e:
            raise EmbeddingTimeoutError(
                f"{self.url} did not answer within {self.timeout_s:g} s", status_code=None
            ) from e
        except (urllib.error.URLError, ConnectionError, OSError) as e:
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
