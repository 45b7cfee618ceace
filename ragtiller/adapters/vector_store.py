"""Any LangChain ``VectorStore`` as a dense tier, searched with the graph's query vector.

The store is asked by vector (its scored by-vector method, whichever of LangChain's names it
has), never by text, so it must hold vectors of the graph's embedder. Known stores declare
their scores and filters (:func:`_known`); any other says what its scores mean when wrapped.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, cast

from langchain_core.documents import Document
from langchain_core.vectorstores import InMemoryVectorStore, VectorStore

from ragtiller.adapters._base import (
    NO_SCORES,
    SCORE_KINDS,
    Pushdown,
    Scope,
    ScoreKind,
    ScoreSemantics,
    StoreTier,
)
from ragtiller.core.tiers import DENSE, Hit, SearchRequest, TierRole
from ragtiller.errors import ConfigurationError

SCORED_METHODS = (
    "similarity_search_with_score_by_vector",  # InMemoryVectorStore, FAISS, PGVector, Qdrant
    "similarity_search_by_vector_with_relevance_scores",  # Chroma (raw distances), Elasticsearch
    "similarity_search_by_vector_with_score",  # Pinecone
)
UNSCORED_METHOD = "similarity_search_by_vector"  # every VectorStore has it
CHROMA_SCALES = {
    "l2": "squared L2 distance",
    "cosine": "cosine distance (1 - cosine)",
    "ip": "inner-product distance (1 - dot product)",
}


def _chroma_space(store: Any) -> str:
    """The collection's distance, read from its stored configuration (``l2`` unless it was made
    with another; ``collection.configuration`` warns on collections LangChain made)."""
    collection = store._collection
    config = getattr(getattr(collection, "_model", None), "configuration_json", None) or {}
    for section in ("hnsw", "spann"):
        space = (config.get(section) or {}).get("space")
        if space:
            return str(space)
    return str((collection.metadata or {}).get("hnsw:space") or "l2")


def _known(store: VectorStore) -> tuple[ScoreSemantics, Pushdown] | None:
    """What a store LangChain ships or ragtiller tests returns and filters on, if known."""
    if isinstance(store, InMemoryVectorStore):
        return ScoreSemantics("similarity", "cosine similarity in [-1, 1]"), "callable"
    if any(
        c.__name__ == "Chroma" and c.__module__.startswith("langchain_chroma")
        for c in type(store).__mro__
    ):
        space = _chroma_space(store)
        return ScoreSemantics("distance", CHROMA_SCALES.get(space, f"{space} distance")), "where"
    return None


class VectorStoreTier(StoreTier):
    """A LangChain ``VectorStore`` as a tier that reads the query vector.

    ``scores`` (``similarity``, ``distance`` or ``none``) and ``pushdown`` are known for
    ``InMemoryVectorStore`` and Chroma, and ``none`` for a store searched only with
    ``similarity_search_by_vector``; any other store must say its ``scores``. A store's own
    async method is awaited (``native_async``), else the sync one runs on the tier's threads.

    Example:
        >>> from langchain_core.vectorstores import InMemoryVectorStore
        >>> from ragtiller.models import HashingEmbedder
        >>> tier = VectorStoreTier(InMemoryVectorStore(HashingEmbedder()), name="notes")
        >>> tier.describe()
        'notes (dense): InMemoryVectorStore, scores: similarity (cosine similarity in [-1, 1]), filters: pushed down (callable)'
    """

    needs_vector = True
    unpushed = "checked on results (over-fetched)"

    def __init__(
        self,
        store: VectorStore,
        *,
        name: str = DENSE,
        role: TierRole = DENSE,
        scores: ScoreKind | None = None,
        pushdown: Pushdown | None = None,
        native_async: bool | None = None,
        search_kwargs: dict[str, Any] | None = None,
    ) -> None:
        if not isinstance(store, VectorStore):
            raise ConfigurationError(
                f"VectorStoreTier wraps a LangChain VectorStore, got {type(store).__name__}"
            )
        known = _known(store)
        self.method = next((m for m in SCORED_METHODS if hasattr(store, m)), UNSCORED_METHOD)
        if scores is None:
            if known is not None:
                semantics = known[0]
            elif self.method == UNSCORED_METHOD:
                semantics = NO_SCORES
            else:
                raise ConfigurationError(
                    f"ragtiller does not know what {type(store).__name__}'s scores mean: wrap "
                    f"it as VectorStoreTier(store, scores='similarity' | 'distance' | 'none') "
                    f"(higher-is-better, lower-is-better, or fuse by rank)"
                )
        elif scores not in SCORE_KINDS:
            raise ConfigurationError(f"scores must be one of {SCORE_KINDS}, got {scores!r}")
        else:
            semantics = ScoreSemantics(scores, f"{scores}, as declared")
        amethod = getattr(type(store), f"a{self.method}", None)
        own = amethod is not None and amethod is not getattr(VectorStore, f"a{self.method}", None)
        super().__init__(
            store,
            name,
            role,
            semantics,
            pushdown or (known[1] if known is not None else "none"),
            own if native_async is None else native_async,
        )
        self.store = store
        self.search_kwargs = dict(search_kwargs or {})

    def _call(self, request: SearchRequest) -> tuple[list[Any], dict[str, Any], Scope]:
        if request.vector is None:
            raise ValueError(f"tier {self.name!r} reads the query vector, but none was given")
        scope, kwargs = self._scope(request)
        return [list(request.vector)], {**self.search_kwargs, **kwargs}, scope

    def _pairs(self, found: Any) -> list[tuple[Document, float | None]]:
        if self.method == UNSCORED_METHOD:
            return [(doc, None) for doc in found]
        return [(doc, float(score)) for doc, score in found]

    def search(self, request: SearchRequest) -> list[Hit]:
        args, kwargs, scope = self._call(request)
        found = getattr(self.store, self.method)(*args, **kwargs)
        return self._hits(self._pairs(found), scope, request.k)

    async def _asearch(self, request: SearchRequest) -> list[Hit]:
        args, kwargs, scope = self._call(request)
        call = cast(Callable[..., Awaitable[Any]], getattr(self.store, f"a{self.method}"))
        return self._hits(self._pairs(await call(*args, **kwargs)), scope, request.k)
