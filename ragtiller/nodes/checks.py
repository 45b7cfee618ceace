"""Provider output is checked at the node boundary: what fails a check is that provider's error,
never the turn's, and never puts a document it was not given into the answer."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ragtiller.core.tiers import Candidate, Hit

INVALID_OUTPUT = "invalid-output"


class InvalidOutput(ValueError):
    pass


_PLAIN_NUMBERS = frozenset({float, int})


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def check_vector(vector: Any) -> list[float]:
    """A non-empty sequence of finite numbers, as plain floats (numpy floats break checkpoints)."""
    if isinstance(vector, str | bytes) or (
        not isinstance(vector, Sequence) and not hasattr(vector, "tolist")
    ):
        raise InvalidOutput(f"embedding is a {type(vector).__name__}, not a sequence of floats")
    values = vector.tolist() if hasattr(vector, "tolist") else list(vector)
    if not values:
        raise InvalidOutput("embedding is empty")
    kinds = set(map(type, values))
    if kinds <= _PLAIN_NUMBERS or all(issubclass(k, float) for k in kinds):
        # one numpy pass, not a Python call per dimension (numpy.float64 is a float too)
        array = np.asarray(values, dtype=np.float64)
        if not np.isfinite(array).all():
            raise InvalidOutput("embedding holds a non-number, NaN or infinity")
        return values if kinds == {float} else array.tolist()
    if not all(_finite(x) for x in values):
        raise InvalidOutput("embedding holds a non-number, NaN or infinity")
    return [float(x) for x in values]


def check_hits(hits: Any, k: int) -> list[Hit]:
    """The best ``k`` hits, each with a str ``id`` and ``text``, a finite ``score``, ids once;
    optional fields get their defaults. Every hit of every tier passes here each turn, so plain
    ``str`` and ``float`` fields take the short test of each check."""
    if not isinstance(hits, list):
        raise InvalidOutput(f"tier returned a {type(hits).__name__}, not a list of hits")
    checked: list[Hit] = []
    seen: set[str] = set()
    for position, hit in enumerate(hits[:k]):
        if not isinstance(hit, dict):
            raise InvalidOutput(f"hit {position} is a {type(hit).__name__}, not a dict")
        get = hit.get
        id_, text, score = get("id"), get("text"), get("score")
        if not isinstance(id_, str) or not id_ or not isinstance(text, str):
            raise InvalidOutput(f"hit {position} lacks a str id or text")
        if not (math.isfinite(score) if type(score) is float else _finite(score)):
            raise InvalidOutput(f"hit {id_!r} has score {score!r}, not a finite number")
        if id_ in seen:
            raise InvalidOutput(f"hit {id_!r} appears twice")
        seen.add(id_)
        doc_id, parent_id, source, metadata = (
            get("doc_id"),
            get("parent_id"),
            get("source"),
            get("metadata"),
        )
        checked.append(
            {
                "id": id_,
                "text": text,
                "score": score if type(score) is float else float(score),  # type: ignore[arg-type]  # checked finite above
                "doc_id": doc_id if type(doc_id) is str and doc_id else str(doc_id or id_),
                "parent_id": parent_id if isinstance(parent_id, str) else None,
                "source": source if type(source) is str else str(source or ""),
                "metadata": metadata if isinstance(metadata, dict) else {},
            }
        )
    return checked


def check_ranking(ranked: Any, given: Sequence[Candidate]) -> list[Candidate]:
    """OUR records of the reranked candidates, each once, with finite new ``final_score``s: a
    provider can reorder the candidates but never change or add one."""
    if not isinstance(ranked, list) or not ranked:
        raise InvalidOutput("reranker returned no candidates")
    ours = {c["id"]: c for c in given}
    out: list[Candidate] = []
    seen: set[str] = set()
    for position, item in enumerate(ranked):
        id_ = item.get("id") if isinstance(item, dict) else None
        if not isinstance(id_, str) or id_ not in ours:
            raise InvalidOutput(f"reranked item {position} is not one of the candidates given")
        if id_ in seen:
            raise InvalidOutput(f"reranked {id_!r} appears twice")
        seen.add(id_)
        score = item.get("final_score", ours[id_]["fused_score"])
        if not _finite(score):
            raise InvalidOutput(f"reranked {id_!r} has score {score!r}, not a finite number")
        reranked: Candidate = {**ours[id_], "final_score": float(score)}
        out.append(reranked)
    return out
