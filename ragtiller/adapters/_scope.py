"""A search's scope (namespaces and metadata filter) in a store's own filter syntax.

Three syntaxes (:data:`Pushdown`):

* ``callable``: a ``Document -> bool`` predicate (LangChain's ``InMemoryVectorStore``, FAISS):
  the whole scope is pushed down, exactly.
* ``where``: a Mongo-style dict of ``$and``, ``$eq`` and ``$in`` (Chroma, and the many stores
  that copied its syntax): the filter is pushed down, but for ``doc_id``; the namespace too,
  unless the turn searches ``default``, which also holds documents without a ``namespace`` key,
  and that a ``where`` clause cannot select. What is not pushed down is checked on the results.
* ``none``: the store is asked without a filter, and the scope is checked on the results.

A filter reads the ``doc_id``, ``source`` and ``parent_id`` a document's hit shows
(:func:`~ragtiller.adapters._hits.filterable`). A store holds ``source`` and ``parent_id`` as
metadata, but a hit's ``doc_id`` is the store's own id of a document whose metadata names none,
which a ``where`` clause cannot select.

Whatever was pushed down, every hit is checked against the whole scope before it leaves the
adapter, so a store whose filter semantics differ from ragtiller's can cost recall, never
leak a document of another tenant or namespace.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from langchain_core.documents import Document

from ragtiller.adapters._hits import LIFTED, filterable
from ragtiller.core.filters import DEFAULT_NAMESPACE, join_where, scope_predicate, where_clause
from ragtiller.core.tiers import SearchRequest

Pushdown = Literal["callable", "where", "none"]
"""How an adapter hands a search's scope to its store (see the module docstring)."""
PUSHDOWNS: tuple[Pushdown, ...] = ("callable", "where", "none")


@dataclass(frozen=True)
class Scope:
    """One search's scope, and what of it the store is given.

    Attributes:
        native: The ``filter`` argument for the store, or None to pass none.
        complete: Whether ``native`` says the whole scope (else results are over-fetched,
            then cut to the scope here).
    """

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
        """Whether ``doc`` is in the scope (the check every hit passes, pushed down or not)."""
        return self.test(filterable(doc) if self.lifted else doc.metadata)


def scope_of(request: SearchRequest, pushdown: Pushdown) -> Scope:
    """The scope of ``request`` for a store that takes ``pushdown`` filters."""
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
                complete = False  # "default" also means "no namespace key": not expressible
            else:
                clauses.append({"namespace": {"$in": namespaces}})
        return Scope(join_where(clauses), complete, namespaces, filter)
    return Scope(None, False, namespaces, filter)
