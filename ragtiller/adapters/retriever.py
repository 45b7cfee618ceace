"""Any LangChain ``BaseRetriever`` as a tier searched with the query text (``embed_query``).

A retriever decides its own result size: the adapter passes ``k`` as a call keyword (which
retrievers that take keywords read, e.g. a ``VectorStoreRetriever``), and for a retriever with
an integer ``k`` field (``BM25Retriever``, ``TFIDFRetriever``, ...) asks a copy with ``k`` set,
so the tier returns as many hits as the graph asks for.
"""

from __future__ import annotations

import asyncio
from typing import Any

from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever

from ragtiller.adapters._hits import ScoreSemantics, to_hits
from ragtiller.adapters._scope import PUSHDOWNS, Pushdown, Scope, scope_of
from ragtiller.adapters.vector_store import OVERFETCH
from ragtiller.core.bulkhead import bulkhead_for
from ragtiller.core.tiers import LEXICAL, Hit, SearchRequest, TierRole
from ragtiller.errors import ConfigurationError


class RetrieverTier:
    """A LangChain ``BaseRetriever`` as a tier that reads the query text.

    Args:
        retriever: Any LangChain ``BaseRetriever``.
        name: The tier's name (in manifests, labels and ``fusion.tier_weights``).
        role: What the switches treat it as; ``lexical`` (turned off with ``hybrid``). Give
            another role (``"web"``, ...) for a tier no switch should touch.
        score_key: A metadata key where the retriever puts a higher-is-better score; None
            (default): retrievers return no scores, so hits are fused by rank.
        pushdown: ``where`` when the retriever passes a ``filter`` keyword to a store with
            Chroma-style filters, ``callable`` for a predicate; default ``none``: the scope is
            checked on the results (a retriever with a ``k`` field is asked for ``OVERFETCH``
            times ``k`` first).
        native_async: Whether the retriever's async path is its own; default: whether its
            class defines ``_aget_relevant_documents``.

    Raises:
        ConfigurationError: ``pushdown`` is not one of the choices.

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
        if pushdown not in PUSHDOWNS:
            raise ConfigurationError(f"pushdown must be one of {PUSHDOWNS}, got {pushdown!r}")
        self.retriever = retriever
        self.name = name
        self.role = role
        self.score_key = score_key
        self.scores = (
            ScoreSemantics("none", "no scores: fused by rank")
            if score_key is None
            else ScoreSemantics("similarity", f"metadata[{score_key!r}], higher is better")
        )
        self.pushdown = pushdown
        own = type(retriever)._aget_relevant_documents
        native = own is not BaseRetriever._aget_relevant_documents
        self.native_async = native if native_async is None else native_async
        self._k_field = isinstance(getattr(retriever, "k", None), int)

    def describe(self) -> str:
        """One line: the tier, its retriever, what its scores mean and what it pushes down."""
        filters = (
            "checked on results" if self.pushdown == "none" else f"pushed down ({self.pushdown})"
        )
        return (
            f"{self.name} ({self.role}): {type(self.retriever).__name__}, scores: "
            f"{self.scores.kind} ({self.scores.scale}), filters: {filters}"
        )

    def __repr__(self) -> str:
        return f"RetrieverTier({self.describe()})"

    def _call(self, request: SearchRequest) -> tuple[BaseRetriever, dict[str, Any], Scope]:
        if request.k < 1:
            raise ValueError(f"k must be > 0, but got {request.k}")
        scope = scope_of(request, self.pushdown)
        fetch = request.k if scope.complete else request.k * OVERFETCH
        kwargs: dict[str, Any] = {"k": fetch}
        if scope.native is not None:
            kwargs["filter"] = scope.native
        retriever = self.retriever
        if self._k_field and retriever.k != fetch:  # type: ignore[attr-defined]
            retriever = retriever.model_copy(update={"k": fetch})
        return retriever, kwargs, scope

    def _hits(self, docs: list[Document], scope: Scope, k: int) -> list[Hit]:
        pairs = [(d, self._score(d)) for d in docs if scope.admits(d)]
        return to_hits(pairs, self.scores, k)

    def _score(self, doc: Document) -> float | None:
        if self.score_key is None:
            return None
        value = doc.metadata.get(self.score_key)
        return float(value) if isinstance(value, int | float) else None

    def search(self, request: SearchRequest) -> list[Hit]:
        """At most ``request.k`` hits in the request's scope, in the retriever's order.

        Raises:
            ValueError: ``request.k`` < 1, or a hit lacks its ``score_key`` score.
        """
        retriever, kwargs, scope = self._call(request)
        return self._hits(retriever.invoke(request.query, **kwargs), scope, request.k)

    async def asearch(self, request: SearchRequest) -> list[Hit]:
        """Async twin of :meth:`search`: the retriever's ``ainvoke`` when its async path is its
        own, else :meth:`search` on this tier's worker threads (never on the event loop)."""
        if not self.native_async:
            pool = bulkhead_for(self, f"tier-{self.name}")
            return await asyncio.wrap_future(pool.submit(self.search, request))
        retriever, kwargs, scope = self._call(request)
        return self._hits(await retriever.ainvoke(request.query, **kwargs), scope, request.k)
