"""Any LangChain ``VectorStore`` as a dense tier, searched with the graph's query vector.

The query is embedded once per turn, by the graph's embedder; the store is asked by vector
(its scored by-vector method, whichever of LangChain's names it has), never by text, so it
must hold vectors of the same embedder. Known stores declare themselves (:func:`_known`);
any other says what its scores mean and which filters it takes when it is wrapped.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, cast

from langchain_core.documents import Document
from langchain_core.vectorstores import InMemoryVectorStore, VectorStore

from ragtiller.adapters._hits import SCORE_KINDS, ScoreKind, ScoreSemantics, to_hits
from ragtiller.adapters._scope import PUSHDOWNS, Pushdown, Scope, scope_of
from ragtiller.core.bulkhead import bulkhead_for
from ragtiller.core.tiers import DENSE, Hit, SearchRequest, TierRole
from ragtiller.errors import ConfigurationError

SCORED_METHODS = (
    "similarity_search_with_score_by_vector",  # InMemoryVectorStore, FAISS, PGVector, Qdrant
    "similarity_search_by_vector_with_relevance_scores",  # Chroma (raw distances), Elasticsearch
    "similarity_search_by_vector_with_score",  # Pinecone
)
"""LangChain's names for "search by vector, with scores", tried in this order."""
UNSCORED_METHOD = "similarity_search_by_vector"
"""Every ``VectorStore`` has it; its hits carry no score, so they are fused by rank."""
OVERFETCH = 4
"""When part of the scope is checked on the results, the store is asked for this many times
``k`` hits, so that the cut to the scope still leaves up to ``k``."""


def _is_chroma(store: VectorStore) -> bool:
    return any(
        c.__name__ == "Chroma" and c.__module__.startswith("langchain_chroma")
        for c in type(store).__mro__
    )


def _chroma_space(store: Any) -> str:
    """The collection's distance (``l2`` unless it was made with another), read from its
    stored configuration (``collection.configuration`` warns on collections LangChain made)."""
    collection = store._collection
    config = getattr(getattr(collection, "_model", None), "configuration_json", None) or {}
    for section in ("hnsw", "spann"):
        space = (config.get(section) or {}).get("space")
        if space:
            return str(space)
    return str((collection.metadata or {}).get("hnsw:space") or "l2")


CHROMA_SCALES = {
    "l2": "squared L2 distance",
    "cosine": "cosine distance (1 - cosine)",
    "ip": "inner-product distance (1 - dot product)",
}


def _known(store: VectorStore) -> tuple[ScoreSemantics, Pushdown] | None:
    """What a store LangChain ships or ragtiller tests returns and filters on, if known."""
    if isinstance(store, InMemoryVectorStore):
        return ScoreSemantics("similarity", "cosine similarity in [-1, 1]"), "callable"
    if _is_chroma(store):
        space = _chroma_space(store)
        return ScoreSemantics("distance", CHROMA_SCALES.get(space, f"{space} distance")), "where"
    return None


class VectorStoreTier:
    """A LangChain ``VectorStore`` as a tier that reads the query vector.

    Args:
        store: Any LangChain ``VectorStore`` holding vectors of the graph's embedder.
        name: The tier's name (in manifests, labels and ``fusion.tier_weights``).
        role: What the switches treat it as (:data:`~ragtiller.core.tiers.TierRole`); ``dense``.
        scores: What the store's scores mean: ``similarity``, ``distance`` or ``none``
            (fused by rank). Known for ``InMemoryVectorStore`` (cosine similarity) and Chroma
            (its collection's distance), and ``none`` for a store that can only be searched
            with ``similarity_search_by_vector``; any other store must say.
        pushdown: Which filters the store takes (``callable``, ``where``, ``none``; see
            :mod:`ragtiller.adapters._scope`); known for the same stores, else ``none``: the
            scope is then checked on over-fetched results.
        native_async: Whether the store's async twin is its own (an async client), so the
            graph awaits it; default: whether the store's class defines one. Otherwise the
            sync method runs on this tier's own worker threads.
        search_kwargs: Extra keyword arguments for every search (e.g. Chroma's
            ``where_document``).

    Raises:
        ConfigurationError: ``scores`` is needed and not given, or ``scores``/``pushdown``
            is not one of the choices.

    Example:
        >>> from langchain_core.vectorstores import InMemoryVectorStore
        >>> from ragtiller.models import HashingEmbedder
        >>> tier = VectorStoreTier(InMemoryVectorStore(HashingEmbedder()), name="notes")
        >>> tier.describe()
        'notes (dense): InMemoryVectorStore, scores: similarity (cosine similarity in [-1, 1]), filters: pushed down (callable)'
    """

    needs_vector = True

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
                semantics = ScoreSemantics("none", "no scores: fused by rank")
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
        if pushdown is not None and pushdown not in PUSHDOWNS:
            raise ConfigurationError(f"pushdown must be one of {PUSHDOWNS}, got {pushdown!r}")
        self.store = store
        self.name = name
        self.role = role
        self.scores = semantics
        self.pushdown: Pushdown = pushdown or (known[1] if known is not None else "none")
        self.search_kwargs = dict(search_kwargs or {})
        amethod = getattr(type(store), f"a{self.method}", None)
        own = amethod is not None and amethod is not getattr(VectorStore, f"a{self.method}", None)
        self.native_async = own if native_async is None else native_async

    def describe(self) -> str:
        """One line: the tier, its store, what its scores mean and what it pushes down."""
        filters = (
            "checked on results (over-fetched)"
            if self.pushdown == "none"
            else f"pushed down ({self.pushdown})"
        )
        return (
            f"{self.name} ({self.role}): {type(self.store).__name__}, scores: "
            f"{self.scores.kind} ({self.scores.scale}), filters: {filters}"
        )

    def __repr__(self) -> str:
        return f"VectorStoreTier({self.describe()})"

    def _call(self, request: SearchRequest) -> tuple[str, list[Any], dict[str, Any], Scope]:
        if request.vector is None:
            raise ValueError(f"tier {self.name!r} reads the query vector, but none was given")
        if request.k < 1:
            raise ValueError(f"k must be > 0, but got {request.k}")
        scope = scope_of(request, self.pushdown)
        kwargs = dict(self.search_kwargs)
        kwargs["k"] = request.k if scope.complete else request.k * OVERFETCH
        if scope.native is not None:
            kwargs["filter"] = scope.native
        return self.method, [list(request.vector)], kwargs, scope

    def _hits(self, found: list[Any], scope: Scope, k: int) -> list[Hit]:
        pairs: list[tuple[Document, float | None]] = (
            [(doc, None) for doc in found]
            if self.method == UNSCORED_METHOD
            else [(doc, float(score)) for doc, score in found]
        )
        return to_hits([p for p in pairs if scope.admits(p[0])], self.scores, k)

    def search(self, request: SearchRequest) -> list[Hit]:
        """At most ``request.k`` hits in the request's scope, best first.

        Raises:
            ValueError: No query vector, or ``request.k`` < 1.
        """
        method, args, kwargs, scope = self._call(request)
        found = getattr(self.store, method)(*args, **kwargs)
        return self._hits(list(found), scope, request.k)

    async def asearch(self, request: SearchRequest) -> list[Hit]:
        """Async twin of :meth:`search`: the store's own async method when it has one, else
        :meth:`search` on this tier's worker threads (never on the event loop)."""
        if not self.native_async:
            pool = bulkhead_for(self, f"tier-{self.name}")
            return await asyncio.wrap_future(pool.submit(self.search, request))
        method, args, kwargs, scope = self._call(request)
        call = cast(Callable[..., Awaitable[Any]], getattr(self.store, f"a{method}"))
        found = await call(*args, **kwargs)
        return self._hits(list(found), scope, request.k)
