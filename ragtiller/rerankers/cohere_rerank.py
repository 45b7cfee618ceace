"""Cohere's hosted reranker through ``langchain_cohere.CohereRerank`` (the paid quality ceiling)."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import SecretStr

from ragtiller.core.bulkhead import bulkhead_for
from ragtiller.core.tiers import Candidate
from ragtiller.errors import ConfigurationError
from ragtiller.errors import MissingCredentialsError as MissingCredentialsError  # re-exported
from ragtiller.rerankers.base import ModelReranker, Reranker, ZScoreReranker, order_by_scores

if TYPE_CHECKING:
    import httpx
    from langchain_cohere import CohereRerank

DEFAULT_MODEL = "rerank-v3.5"
API_KEY_ENV = "COHERE_API_KEY"
MAX_DOCUMENTS_PER_CALL = 100  # Cohere bills one search unit per query with up to 100 documents

INSTALL_HINT = "the Cohere reranker needs langchain-cohere: pip install 'ragtiller[cohere]'"
_RETRIED_BY_SDK = frozenset({408, 409, 429})


def _refuse_sdk_retry(response: httpx.Response) -> None:
    """Fail at once on the statuses the SDK would retry twice, sleeping about 1 s then 2 s: far
    beyond a rerank latency budget. The free floor is this provider's retry."""
    if response.status_code in _RETRIED_BY_SDK or response.status_code >= 500:
        response.raise_for_status()


class CohereReranker(ModelReranker):
    """Reranks with Cohere's API on its bulkhead; ``final_score`` is its ``relevance_score`` in
    [0, 1]. The key is a ``SecretStr`` and never shows in ``detail``, ``error`` or logs."""

    name = "cohere"

    def __init__(
        self,
        *,
        model: str = DEFAULT_MODEL,
        api_key: SecretStr | str | None = None,
        base_url: str | None = None,
        timeout_s: float = 5.0,
        max_candidates: int = MAX_DOCUMENTS_PER_CALL,
        max_tokens_per_doc: int | None = None,
        floor: Reranker | None = None,
        env: Mapping[str, str] = os.environ,
    ) -> None:
        if not 0 < max_candidates <= MAX_DOCUMENTS_PER_CALL:
            raise ConfigurationError(
                f"max_candidates must be in 1..{MAX_DOCUMENTS_PER_CALL}, but got {max_candidates}"
            )
        if timeout_s <= 0:
            raise ConfigurationError(f"timeout_s must be > 0, but got {timeout_s}")
        if isinstance(api_key, str):
            api_key = SecretStr(api_key)
        if api_key is None and env.get(API_KEY_ENV, "").strip():
            api_key = SecretStr(env[API_KEY_ENV].strip())
        self._api_key = api_key if api_key is not None and api_key.get_secret_value() else None
        self.model = model
        self.base_url = base_url
        self.timeout_s = timeout_s
        self.max_candidates = max_candidates
        self.max_tokens_per_doc = max_tokens_per_doc
        self.floor = floor or ZScoreReranker()
        self._http: httpx.Client | None = None
        self._compressor: CohereRerank | None = None

    def __repr__(self) -> str:
        return f"CohereReranker(model={self.model!r}, has_credentials={self.has_credentials})"

    @property
    def has_credentials(self) -> bool:
        """Whether an API key is set (it is not checked until the first call)."""
        return self._api_key is not None

    def facts(self) -> dict[str, Any]:
        return {"model": self.model}

    def secret(self) -> str | None:
        return self._api_key.get_secret_value() if self._api_key is not None else None

    async def order(
        self, query: str, sent: list[Candidate], top_n: int
    ) -> tuple[list[Candidate], dict[str, Any]]:
        compressor = self._compressor if self._compressor is not None else self._build()
        texts = [c["text"] for c in sent]
        # Off the loop's default executor; the HTTP client's own timeouts answer first, and
        # twice them stops a call that ignores them.
        results = await bulkhead_for(self, "reranker-cohere").call(
            lambda: compressor.rerank(
                texts, query, top_n=top_n, max_tokens_per_doc=self.max_tokens_per_doc
            ),
            timeout_s=2 * self.timeout_s,
        )
        return _apply_results(sent, results), {}

    def close(self) -> None:
        if self._http is not None:
            self._http.close()
        self._http = None
        self._compressor = None

    def _build(self) -> CohereRerank:
        if self._api_key is None:
            raise MissingCredentialsError(f"no Cohere API key: set {API_KEY_ENV} or pass api_key=")
        try:
            import cohere
            import httpx
            from langchain_cohere import CohereRerank
        except ImportError as e:
            raise ImportError(INSTALL_HINT) from e
        self._http = httpx.Client(
            timeout=self.timeout_s, event_hooks={"response": [_refuse_sdk_retry]}
        )
        client = cohere.ClientV2(
            api_key=self._api_key.get_secret_value,
            base_url=self.base_url,
            timeout=self.timeout_s,
            httpx_client=self._http,
            client_name="ragtiller",
        )
        self._compressor = CohereRerank(
            client=client, model=self.model, top_n=None, cohere_api_key=self._api_key
        )
        return self._compressor


def _apply_results(sent: list[Candidate], results: Sequence[Mapping[str, Any]]) -> list[Candidate]:
    """Candidates in Cohere's order, ``final_score`` its ``relevance_score`` (checked)."""
    picked: list[Candidate] = []
    scores: list[float] = []
    seen: set[int] = set()
    for item in results:
        index, score = item.get("index"), item.get("relevance_score")
        if not isinstance(index, int) or not 0 <= index < len(sent) or index in seen:
            raise ValueError(f"Cohere returned an invalid document index {index!r}")
        if not isinstance(score, int | float) or not math.isfinite(score) or not 0 <= score <= 1:
            raise ValueError(f"Cohere returned a relevance_score outside [0, 1]: {score!r}")
        seen.add(index)
        picked.append(sent[index])
        scores.append(float(score))
    return order_by_scores(picked, scores)
