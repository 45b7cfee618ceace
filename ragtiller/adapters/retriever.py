"""Any LangChain ``BaseRetriever`` as a tier searched with the query text (``embed_query``).

A retriever decides its own result size: the adapter passes ``k`` as a call keyword (which a
``VectorStoreRetriever`` reads), and asks a retriever with an integer ``k`` field
(``BM25Retriever``, ...) through a copy with ``k`` set.
"""

from __future__ import annotations

from typing import Any

from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever

from ragtiller.adapters._base import NO_SCORES, Pushdown, Scope, ScoreSemantics, StoreTier
from ragtiller.core.tiers import LEXICAL, Hit, SearchRequest, TierRole
from ragtiller.errors import ConfigurationError


class RetrieverTier(StoreTier):
    """A LangChain ``BaseRetriever`` as a tier that reads the query text.

    ``role`` ``lexical`` is turned off with ``hybrid``; give another for a tier no switch should
    touch. ``score_key``: a metadata key holding a higher-is-better score (default: fused by
    rank). ``pushdown``: ``where`` or ``callable`` when the retriever passes a ``filter`` keyword
    to its store. ``native_async`` default: whether its class defines ``_aget_relevant_documents``.

    Example:
        >>> from langchain_community.retrievers import BM25Retriever  # doctest: +SKIP
        >>> tier = RetrieverTier(BM25Retriever.from_documents(docs), name="bm25")  # doctest: +SKIP
    """

    needs_vector = False

    def __init__(
        self,
        retriever: BaseRetriever,
        *,
        name: str = LEXICAL,
        role: TierRole = LEXICAL,
        score_key: str | None = None,
        pushdown: Pushdown = "none",
        native_async: bool | None = None,
    ) -> None:
        if not isinstance(retriever, BaseRetriever):
            raise ConfigurationError(
                f"RetrieverTier wraps a LangChain BaseRetriever, got {type(retriever).__name__}"
            )
        scores = (
            NO_SCORES
            if score_key is None
            else ScoreSemantics("similarity", f"metadata[{score_key!r}], higher is better")
        )
        own = type(retriever)._aget_relevant_documents
        native = own is not BaseRetriever._aget_relevant_documents
        native_async = native if native_async is None else native_async
        super().__init__(retriever, name, role, scores, pushdown, native_async)
        self.retriever = retriever
        self.score_key = score_key
        self._k_field = isinstance(getattr(retriever, "k", None), int)

    def _call(self, request: SearchRequest) -> tuple[BaseRetriever, dict[str, Any], Scope]:
        scope, kwargs = self._scope(request)
        retriever = self.retriever
        if self._k_field and retriever.k != kwargs["k"]:  # type: ignore[attr-defined]
            retriever = retriever.model_copy(update={"k": kwargs["k"]})
        return retriever, kwargs, scope

    def _score(self, doc: Document) -> float | None:
        value = None if self.score_key is None else doc.metadata.get(self.score_key)
        return float(value) if isinstance(value, int | float) else None

    def search(self, request: SearchRequest) -> list[Hit]:
        retriever, kwargs, scope = self._call(request)
        docs = retriever.invoke(request.query, **kwargs)
        return self._hits([(d, self._score(d)) for d in docs], scope, request.k)

    async def _asearch(self, request: SearchRequest) -> list[Hit]:
        retriever, kwargs, scope = self._call(request)
        docs = await retriever.ainvoke(request.query, **kwargs)
        return self._hits([(d, self._score(d)) for d in docs], scope, request.k)
