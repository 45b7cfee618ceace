"""Documents rank, passages answer: a passage's document, and passages placed under ranked documents."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ragtiller.core.tiers import Candidate, Hit

DocKey = tuple[str, str]


def doc_key(hit: Hit | Candidate | Mapping[str, Any]) -> DocKey:
    """A hit's document: its namespace and ``doc_id`` (ids are unique per namespace)."""
    return (str(hit["metadata"].get("namespace", "")), hit["doc_id"])


def interleave(
    passages: Sequence[Candidate],
    documents: Sequence[DocKey],
    within: Callable[[list[Candidate]], list[Candidate]] | None = None,
) -> list[Candidate]:
    """Passages grouped under ranked documents, each document's best passages in its slots.

    ``passages`` is the fused passage order. It decides how many of the leading positions
    each document holds and where (like Elasticsearch field collapsing with ``inner_hits``,
    without forcing a document's passages to sit together). ``documents`` decides which
    document is first, second, ...: the i-th document to appear in ``passages`` hands its
    positions to ``documents[i]`` (documents without passages are skipped). ``within`` orders one
    document's passages (default: fused order). Passages a document has beyond its positions
    follow at the end, in fused order; nothing is dropped or repeated.

    Example:
        >>> def c(i, d):
        ...     return {"id": i, "doc_id": d, "metadata": {}}
        >>> order = interleave([c("a1", "A"), c("b1", "B"), c("a2", "A")], [("", "B"), ("", "A")])
        >>> [p["id"] for p in order]
        ['b1', 'a1', 'a2']
    """
    by_doc: dict[DocKey, list[Candidate]] = {}
    for cand in passages:
        by_doc.setdefault(doc_key(cand), []).append(cand)
    if within is not None:
        by_doc = {key: within(group) for key, group in by_doc.items()}
    ranked = [key for key in dict.fromkeys(documents) if key in by_doc]
    listed = set(ranked)
    ranked += [key for key in by_doc if key not in listed]
    pattern = [doc_key(c) for c in passages]
    rename = dict(zip(dict.fromkeys(pattern), ranked, strict=True))
    taken: dict[DocKey, int] = {}
    out: list[Candidate] = []
    for slot in pattern:
        key = rename[slot]
        n = taken.get(key, 0)
        if n < len(by_doc[key]):
            out.append(by_doc[key][n])
            taken[key] = n + 1
    placed = {id(c) for c in out}
    out.extend(c for key in ranked for c in by_doc[key] if id(c) not in placed)
    return out
