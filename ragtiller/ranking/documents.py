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

    ``passages`` is the fused passage order: each document holds the positions its own passages
    hold there (like Elasticsearch field collapsing with ``inner_hits``, without forcing a
    document's passages to sit together). ``documents`` decides which document comes first: a
    document enters no earlier than every document ranked above it, so its positions before
    that entry move to the entry (documents without passages are skipped). ``within`` orders
    one document's passages (default: fused order). Nothing is dropped or repeated.

    Example:
        >>> def c(i, d):
        ...     return {"id": i, "doc_id": d, "metadata": {}}
        >>> fused = [c("a1", "A"), c("a2", "A"), c("b1", "B"), c("a3", "A"), c("b2", "B")]
        >>> [p["id"] for p in interleave(fused, [("", "B"), ("", "A")])]
        ['b1', 'a1', 'a2', 'a3', 'b2']
    """
    by_doc: dict[DocKey, list[Candidate]] = {}
    slots: dict[DocKey, list[int]] = {}
    for position, cand in enumerate(passages):
        by_doc.setdefault(doc_key(cand), []).append(cand)
        slots.setdefault(doc_key(cand), []).append(position)
    if within is not None:
        by_doc = {key: within(group) for key, group in by_doc.items()}
    ranked = [key for key in dict.fromkeys(documents) if key in by_doc]
    listed = set(ranked)
    ranked += [key for key in by_doc if key not in listed]
    entry = 0
    placed: list[tuple[int, int, int, Candidate]] = []
    for rank, key in enumerate(ranked):
        entry = max(entry, slots[key][0])
        for n, cand in enumerate(by_doc[key]):
            placed.append((max(slots[key][n], entry), rank, n, cand))
    return [cand for *_, cand in sorted(placed, key=lambda p: p[:3])]
