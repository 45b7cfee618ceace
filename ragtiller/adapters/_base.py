"""What the two adapters share: LangChain ``Document``s as hits, what a store's scores mean, and
a search's scope in the store's own filter syntax.

Fusion ranks (RRF) or standardises (z-score, min-max) each tier's list on its own, so the one
thing an adapter must get right is the direction: a distance ``d`` becomes ``1 - d``, and hits
without scores score ``(n - i) / n`` by rank. Whatever of the scope was pushed down, every hit
is checked against the whole scope before it leaves the adapter, so a store whose filter
semantics differ from ragtiller's can cost recall, never leak another tenant's document.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from langchain_core.documents import Document

from ragtiller.core.bulkhead import bulkhead_for
from ragtiller.core.filters import DEFAULT_NAMESPACE, join_where, scope_predicate, where_clause
from ragtiller.core.tiers import HIT_FIELDS, Hit, SearchRequest, TierRole
from ragtiller.errors import ConfigurationError

ScoreKind = Literal["similarity", "distance", "none"]
"""``similarity`` is kept, ``distance`` turned into ``1 - d``, ``none`` fused by rank."""
SCORE_KINDS: tuple[ScoreKind, ...] = ("similarity", "distance", "none")
LIFTED = frozenset(HIT_FIELDS)

Pushdown = Literal["callable", "where", "none"]
"""How an adapter hands a search's scope to its store: a ``Document -> bool`` predicate
(``InMemoryVectorStore``, FAISS), a Chroma-style ``where`` dict, or nothing (checked on the
results)."""
PUSHDOWNS: tuple[Pushdown, ...] = ("callable", "where", "none")
OVERFETCH = 4
"""When part of the scope is checked on the results, the store is asked for this many times
``k`` hits, so that the cut to the scope still leaves up to ``k``."""


@dataclass(frozen=True)
class ScoreSemantics:
    """What a store's raw scores mean; ``scale`` in words, for ``describe()``."""

    kind: ScoreKind
    scale: str

    def normalise(self, raw: Sequence[float | None]) -> list[float]:
        """Higher-is-better scores for hits in the store's order, best first."""
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
    """The document's id; without one, a hash of its source and text (stable across calls)."""
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
    seen: set[str] = set()
    kept: list[tuple[Document, float | None]] = []
    for doc, raw in pairs:
        id_ = document_id(doc)
        if id_ not in seen:
            seen.add(id_)
            kept.append((doc, raw))
    kept = kept[:k]
    normalised = scores.normalise([raw for _, raw in kept])
    hits = [to_hit(doc, s) for (doc, _), s in zip(kept, normalised, strict=True)]
    hits.sort(key=lambda h: -h["score"])  # stable: the store's order breaks ties
    return hits


@dataclass(frozen=True)
class Scope:
    """One search's scope: ``native``, the store's ``filter`` argument (None: none), and
    whether it says the whole scope (else results are over-fetched, then cut here)."""

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
    """The scope of ``request`` for a store that takes ``pushdown`` filters. A ``where`` clause
    cannot select a hit's ``doc_id`` (the store's own id when the metadata names none), nor
    ``default``, which also holds documents without a ``namespace`` key."""
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
    """A LangChain store or retriever as a tier: its scope, its hits, its async path."""

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
        """The store's own async path when it has one, else :meth:`search` on this tier's
        worker threads (never on the event loop)."""
        if self.native_async:
            return await self._asearch(request)
        pool = bulkhead_for(self, f"tier-{self.name}")
        return await asyncio.wrap_future(pool.submit(self.search, request))

    async def _asearch(self, request: SearchRequest) -> list[Hit]:
        raise NotImplementedError

    def _scope(self, request: SearchRequest) -> tuple[Scope, dict[str, Any]]:
        """The scope of ``request`` and the store's ``k`` and ``filter`` arguments for it."""
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
