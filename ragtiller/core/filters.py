"""The portable metadata filter every tier understands: key -> value (equality) or list of values
(membership), every key must match and a document without the key never does (default deny);
each tier pushes it down in its store's syntax (:func:`to_where`) or tests results (:func:`predicate`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

Scalar = str | int | float | bool

# Bounds on one filter, so it stays cheap to push down, check and record (manifest, checkpoint).
MAX_FILTER_KEYS = 16
MAX_FILTER_VALUES = 256
MAX_FILTER_KEY_CHARS = 256
MAX_FILTER_STR_CHARS = 1024
INT_BITS = 64  # what stores, checkpointers and JSON parsers hold

# a lone surrogate (an undecodable byte from argv or a file name): no UTF-8 encoder takes it
SURROGATE = re.compile("[\ud800-\udfff]")

DEFAULT_NAMESPACE = "default"  # of a document whose metadata names none
TENANT_KEY = "tenant"  # the metadata key a turn's tenant filters on

_MISSING = object()


def namespace_of(metadata: Mapping[str, Any]) -> str:
    return str(metadata.get("namespace") or DEFAULT_NAMESPACE)


def scope_predicate(
    namespaces: Sequence[str] | None, filter: Mapping[str, Any] | None
) -> Callable[[Mapping[str, Any]], bool]:
    """Whether a document is in a search's namespaces (None: all) and passes its filter."""
    allowed_namespaces = None if namespaces is None else frozenset(namespaces)
    passes = predicate(filter)

    def test(metadata: Mapping[str, Any]) -> bool:
        if allowed_namespaces is not None and namespace_of(metadata) not in allowed_namespaces:
            return False
        return passes(metadata)

    return test


def allowed(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list | tuple | set | frozenset) else [value]


def comparable(value: Any) -> tuple[bool, Any]:
    """``value`` as Chroma compares it: a bool never equals a number, 1 equals 1.0."""
    return (isinstance(value, bool), value)


def allowed_values(expected: Any) -> list[tuple[bool, Any]]:
    return [comparable(value) for value in allowed(expected)]


def filter_key(filter: Mapping[str, Any] | None) -> tuple[tuple[str, tuple[Any, ...]], ...]:
    """``filter`` as a cache key: two filters share one only when they match the same values."""
    return tuple(sorted((key, tuple(allowed_values(v))) for key, v in (filter or {}).items()))


def predicate(filter: Mapping[str, Any] | None) -> Callable[[Mapping[str, Any]], bool]:
    """``filter`` as a test of one metadata dict (None or empty passes everything).

    Example:
        >>> predicate({"tenant": "acme", "year": [2023, 2024]})({"tenant": "acme", "year": 2024})
        True
        >>> predicate({"tenant": "acme"})({"year": 2024})
        False
        >>> predicate({"flag": True})({"flag": 1}), predicate({"flag": 1.0})({"flag": 1})
        (False, True)
    """
    items = [(key, allowed_values(expected)) for key, expected in (filter or {}).items()]

    def test(metadata: Mapping[str, Any]) -> bool:
        for key, values in items:
            value = metadata.get(key, _MISSING)
            if value is _MISSING or comparable(value) not in values:
                return False
        return True

    return test


def where_clause(key: str, value: Any) -> dict[str, Any]:
    """One filter entry in the Mongo-style syntax of Chroma and Pinecone (``$eq`` or ``$in``);
    an entry already in that syntax is kept as it is."""
    if key.startswith("$") or isinstance(value, Mapping):
        return {key: value}
    values = allowed(value)
    return {key: {"$eq": value}} if values == [value] else {key: {"$in": values}}


def to_where(filter: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """``filter`` in the Mongo-style syntax; None for no filter.

    Example:
        >>> to_where({"tenant": "acme", "year": [2023, 2024]})
        {'$and': [{'tenant': {'$eq': 'acme'}}, {'year': {'$in': [2023, 2024]}}]}
    """
    clauses = [where_clause(key, value) for key, value in (filter or {}).items()]
    return join_where(clauses)


def join_where(clauses: list[dict[str, Any]]) -> dict[str, Any] | None:
    # Chroma refuses a one-item $and
    if not clauses:
        return None
    return clauses[0] if len(clauses) == 1 else {"$and": clauses}


def filter_problem(filter: Any, *, reserved: frozenset[str] = frozenset()) -> str | None:
    """What is wrong with ``filter`` as a portable filter, or None; ``reserved`` keys have
    fields of their own (a run context's ``tenant`` and ``namespace``)."""
    if not isinstance(filter, Mapping):
        return f"must be a dict of metadata key -> value or list of values, got {type(filter).__name__}"
    if not filter:
        return "must name at least one key; leave it out to filter nothing"
    if len(filter) > MAX_FILTER_KEYS:
        return f"names {len(filter)} keys; at most {MAX_FILTER_KEYS}"
    for key, value in filter.items():
        if not isinstance(key, str) or not key.strip() or key.startswith("$"):
            return f"key {shown(key)} must be a non-blank str not starting with '$'"
        if len(key) > MAX_FILTER_KEY_CHARS:
            return f"a key is {len(key)} characters long; at most {MAX_FILTER_KEY_CHARS}"
        if SURROGATE.search(key):
            return f"key {key!r} holds an undecodable character (a lone surrogate)"
        if key in reserved:
            return f"key {key!r} has its own field: pass {key}=... instead"
        values = value if isinstance(value, list) else [value]
        if not values:
            return f"{key!r}: an empty list allows nothing; leave the key out or name a value"
        if len(values) > MAX_FILTER_VALUES:
            return f"{key!r}: {len(values)} values; at most {MAX_FILTER_VALUES}"
        for item in values:
            problem = _value_problem(item)
            if problem is not None:
                return f"{key!r}: {problem}"
    return None


def _value_problem(item: object) -> str | None:
    if isinstance(item, str) and len(item) > MAX_FILTER_STR_CHARS:
        return f"a str value is {len(item)} characters long; at most {MAX_FILTER_STR_CHARS}"
    if isinstance(item, str) and SURROGATE.search(item):
        return f"value {item!r} holds an undecodable character (a lone surrogate)"
    if isinstance(item, int) and not -(2 ** (INT_BITS - 1)) <= item < 2 ** (INT_BITS - 1):
        return f"an int value does not fit in {INT_BITS} bits"
    if not isinstance(item, Scalar) or (isinstance(item, float) and not math.isfinite(item)):
        return f"value {shown(item)} is not a str, int, finite float or bool"
    return None


def shown(value: object, limit: int = 80) -> str:
    """``value``'s repr for a message, cut to ``limit`` characters (an int too long to print
    shows as its type)."""
    try:
        text = repr(value)
    except ValueError:
        return f"<{type(value).__name__}>"
    return text[:limit]
