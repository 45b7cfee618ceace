"""Bring your own store: a LangChain ``VectorStore`` or ``BaseRetriever`` as a tier (docs/usage.md,
"Bring your own store"). Every hit is checked against the whole scope before it leaves, whatever
was pushed down: a store whose filters differ can cost recall, never leak.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.vectorstores import InMemoryVectorStore, VectorStore

from ragtiller.core.bulkhead import bulkhead_for
from ragtiller.core.filters import DEFAULT_NAMESPACE, join_where, scope_predicate, where_clause
from ragtiller.core.tiers import DENSE, HIT_FIELDS, LEXICAL, Hit, SearchRequest, Tier, TierRole
from ragtiller.errors import ConfigurationError

ScoreKind = Literal["similarity", "distance", "none"]  # none: fused by rank
SCORE_KINDS: tuple[ScoreKind, ...] = ("similarity", "distance", "none")
LIFTED = frozenset(HIT_FIELDS)

# how a search's scope reaches the store: a Document -> bool predicate (InMemoryVectorStore,
# FAISS), a Chroma-style where dict, or nothing (checked on the results)
Pushdown = Literal["callable", "where", "none"]
PUSHDOWNS: tuple[Pushdown, ...] = ("callable", "where", "none")
OVERFETCH = 4  # k times this when the scope is cut on the results, so that up to k are left


@dataclass(frozen=True)
class ScoreSemantics:
    """What a store's raw scores mean; ``scale`` in words, for ``describe()``."""

    kind: ScoreKind
    scale: str

    def normalise(self, raw: Sequence[float | None]) -> list[float]:
        if self.kind == "none":
            n = len(raw)
            return [(n - i) / n for i in range(n)]
        scores = []
        for value in raw:
            if value is None or not math.isfinite(value):
                raise ValueError(f"the store returned score {value!r}; expected a {self.scale}")
            scores.append(float(value) if self.kind == "similarity" else 1.0 - float(value))
        return scores


NO_SCORES = ScoreSemantics("none", "no scores: fused by rank")


def document_id(doc: Document) -> str:
    if doc.id:
        return str(doc.id)
    source = str(doc.metadata.get("source", ""))
    digest = hashlib.sha256(f"{source}\x1f{doc.page_content}".encode()).hexdigest()
    return f"sha256:{digest[:32]}"


def to_hit(doc: Document, score: float) -> Hit:
    md: dict[str, Any] = dict(doc.metadata)
    id_ = document_id(doc)
    parent = md.get("parent_id")
    return Hit(
        id=id_,
        text=doc.page_content,
        score=score,
        doc_id=str(md.get("doc_id") or id_),
        parent_id=parent if isinstance(parent, str) and parent else None,
        source=str(md.get("source") or ""),
        metadata={k: v for k, v in md.items() if k not in HIT_FIELDS},
    )


def to_hits(
    pairs: Sequence[tuple[Document, float | None]], scores: ScoreSemantics, k: int
) -> list[Hit]:
    """At most ``k`` hits, best first, each id once (a store may repeat a chunk)."""
    firsts: dict[str, tuple[Document, float | None]] = {}
    for doc, raw in pairs:
        firsts.setdefault(document_id(doc), (doc, raw))
    kept = list(firsts.values())[:k]
    normalised = scores.normalise([raw for _, raw in kept])
    hits = [to_hit(doc, s) for (doc, _), s in zip(kept, normalised, strict=True)]
    hits.sort(key=lambda h: -h["score"])  # stable: the store's order breaks ties
    return hits


@dataclass(frozen=True)
class Scope:
    """One search's scope: ``native``, the store's ``filter`` argument, and whether it is
    ``complete`` (else results are over-fetched, then cut here)."""

    native: Any
    complete: bool
    namespaces: Sequence[str] | None
    filter: Any
    test: Callable[[Mapping[str, Any]], bool] = field(init=False, repr=False, compare=False)
    lifted: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "test", scope_predicate(self.namespaces, self.filter))
        object.__setattr__(self, "lifted", not LIFTED.isdisjoint(self.filter or ()))

    def admits(self, doc: Document) -> bool:
        """Whether ``doc`` is in the scope, as its hit shows it (``doc_id`` included)."""
        if not self.lifted:
            return self.test(doc.metadata)
        hit = to_hit(doc, 0.0)
        return self.test({**hit["metadata"], **{key: hit[key] for key in LIFTED}})  # type: ignore[literal-required]


def scope_of(request: SearchRequest, pushdown: Pushdown) -> Scope:
    """A ``where`` clause cannot select a hit's ``doc_id`` (the store's id when the metadata has
    none), nor ``default``, which also holds documents without a ``namespace`` key."""
    namespaces = list(request.namespaces) if request.namespaces is not None else None
    filter = dict(request.filter) if request.filter else None
    if namespaces is None and filter is None:
        return Scope(None, True, None, None)
    if pushdown == "callable":
        scope = Scope(None, True, namespaces, filter)
        return Scope(scope.admits, True, namespaces, filter)
    if pushdown == "where":
        pushed = {key: value for key, value in (filter or {}).items() if key != "doc_id"}
        clauses = [where_clause(key, value) for key, value in pushed.items()]
        complete = len(pushed) == len(filter or {})
        if namespaces is not None:
            if DEFAULT_NAMESPACE in namespaces:
                complete = False
            else:
                clauses.append({"namespace": {"$in": namespaces}})
        return Scope(join_where(clauses), complete, namespaces, filter)
    return Scope(None, False, namespaces, filter)


class StoreTier:
    needs_vector: bool
    unpushed = "checked on results"

    def __init__(
        self,
        wrapped: object,
        name: str,
        role: TierRole,
        scores: ScoreSemantics,
        pushdown: Pushdown,
        native_async: bool,
    ) -> None:
        if pushdown not in PUSHDOWNS:
            raise ConfigurationError(f"pushdown must be one of {PUSHDOWNS}, got {pushdown!r}")
        self._wrapped = wrapped
        self.name = name
        self.role = role
        self.scores = scores
        self.pushdown = pushdown
        self.native_async = native_async

    def describe(self) -> str:
        """One line: the tier, its store, what its scores mean and what it pushes down."""
        filters = self.unpushed if self.pushdown == "none" else f"pushed down ({self.pushdown})"
        return (
            f"{self.name} ({self.role}): {type(self._wrapped).__name__}, scores: "
            f"{self.scores.kind} ({self.scores.scale}), filters: {filters}"
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.describe()})"

    def search(self, request: SearchRequest) -> list[Hit]:
        raise NotImplementedError

    async def asearch(self, request: SearchRequest) -> list[Hit]:
        # the store's own async path, else search on this tier's threads (never the loop)
        if self.native_async:
            return await self._asearch(request)
        pool = bulkhead_for(self, f"tier-{self.name}")
        return await asyncio.wrap_future(pool.submit(self.search, request))

    async def _asearch(self, request: SearchRequest) -> list[Hit]:
        raise NotImplementedError

    def _scope(self, request: SearchRequest) -> tuple[Scope, dict[str, Any]]:
        if request.k < 1:
            raise ValueError(f"k must be > 0, but got {request.k}")
        scope = scope_of(request, self.pushdown)
        kwargs: dict[str, Any] = {"k": request.k if scope.complete else request.k * OVERFETCH}
        if scope.native is not None:
            kwargs["filter"] = scope.native
        return scope, kwargs

    def _hits(
        self, pairs: Sequence[tuple[Document, float | None]], scope: Scope, k: int
    ) -> list[Hit]:
        return to_hits([p for p in pairs if scope.admits(p[0])], self.scores, k)


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
    """The collection's distance, from its stored configuration (``.configuration`` warns)."""
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
    """A LangChain ``VectorStore`` as a tier that reads the query vector; a store other than
    ``InMemoryVectorStore`` or Chroma that returns scores must say what they mean (``scores``).

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
        pushdown = pushdown or (known[1] if known is not None else "none")
        native = own if native_async is None else native_async
        super().__init__(store, name, role, semantics, pushdown, native)
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


class RetrieverTier(StoreTier):
    """A LangChain ``BaseRetriever`` as a tier that reads the query text; ``score_key`` names a
    higher-is-better metadata score (else fused by rank); roles, pushdown: docs/usage.md."""

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


TierLike = Tier | VectorStore | BaseRetriever  # what build_graph(tiers=[...]) takes


def as_tier(value: TierLike | Any, position: int = 0) -> Tier:
    """A tier as it is; a ``VectorStore`` or ``BaseRetriever`` wrapped with its defaults."""
    if isinstance(value, VectorStore):
        return VectorStoreTier(value)
    if isinstance(value, BaseRetriever):
        return RetrieverTier(value)
    missing = [m for m in ("name", "needs_vector", "search") if not hasattr(value, m)]
    if missing:
        raise ConfigurationError(
            f"tiers[{position}] is a {type(value).__name__}: not a ragtiller Tier (it lacks "
            f"{', '.join(missing)}), a LangChain VectorStore or a BaseRetriever"
        )
    tier: Tier = value
    return tier


__all__ = (
    "Pushdown",
    "RetrieverTier",
    "ScoreKind",
    "ScoreSemantics",
    "TierLike",
    "VectorStoreTier",
    "as_tier",
)
