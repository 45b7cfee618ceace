"""BM25 corpus statistics kept inside the Pinecone sparse index, so every replica reads the same.

They live in a reserved namespace (never searched): one header record naming the current
version, and the term table split over part records (Pinecone holds at most 40 KB of metadata
per record). A write stores the new parts, then switches the header, then deletes the old
parts, so a reader sees either the old statistics or the new, never a mix.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from ragtiller.pinecone.calls import RESERVED_NAMESPACE_PREFIX
from ragtiller.pinecone.sparse_bm25 import BM25Stats

STATS_NAMESPACE = f"{RESERVED_NAMESPACE_PREFIX}_bm25_stats"
"""The namespace holding the statistics records."""
HEADER_ID = "bm25-stats"
PART_BYTES = 24_000
"""Term-table JSON per part record, in bytes (escaped, it stays under Pinecone's 40 KB)."""
FETCH_BATCH = 100
"""Ids per fetch request (they travel in the URL)."""
_MARKER = {"indices": [0], "values": [1.0]}
"""A sparse index requires sparse values on every record; statistics records carry this one."""


def stats_version(stats: BM25Stats) -> str:
    """A digest of ``stats``: equal statistics, equal version."""
    return hashlib.sha256(stats.model_dump_json().encode()).hexdigest()[:16]


def write_stats(index: Any, stats: BM25Stats) -> str:
    """Store ``stats`` in ``index`` (a ``pinecone`` data-plane handle) and make them current.

    Returns:
        The version written.

    Raises:
        pinecone.exceptions.PineconeException: A request failed; the previous statistics stay
            current (their header was not switched) or, after the switch, old parts remain.
    """
    version = stats_version(stats)
    old = _header(index)
    parts = _parts(stats)
    records = [
        {"id": _part_id(version, i), "sparse_values": _MARKER, "metadata": {"terms": part}}
        for i, part in enumerate(parts)
    ]
    for first in range(0, len(records), FETCH_BATCH):
        index.upsert(vectors=records[first : first + FETCH_BATCH], namespace=STATS_NAMESPACE)
    summary = stats.model_dump(exclude={"terms"})
    header = {
        "id": HEADER_ID,
        "sparse_values": _MARKER,
        "metadata": {"version": version, "parts": len(parts), "summary": json.dumps(summary)},
    }
    index.upsert(vectors=[header], namespace=STATS_NAMESPACE)
    if old is not None and old[0] != version:
        stale = [_part_id(old[0], i) for i in range(old[1])]
        for first in range(0, len(stale), FETCH_BATCH):
            index.delete(ids=stale[first : first + FETCH_BATCH], namespace=STATS_NAMESPACE)
    return version


def read_version(index: Any) -> str | None:
    """The version of the current statistics, or None when the index holds none (one fetch)."""
    header = _header(index)
    return header[0] if header else None


def read_stats(index: Any) -> tuple[str, BM25Stats] | None:
    """The current statistics and their version, or None when the index holds none.

    Raises:
        ValueError: A part is missing or unreadable (written by another ragtiller version, or
            removed by hand); write the statistics again.
    """
    fetched = _fetch(index, [HEADER_ID])
    if HEADER_ID not in fetched:
        return None
    meta = fetched[HEADER_ID]
    version, count = str(meta["version"]), int(meta["parts"])
    ids = [_part_id(version, i) for i in range(count)]
    parts: dict[str, Any] = {}
    for first in range(0, len(ids), FETCH_BATCH):
        parts.update(_fetch(index, ids[first : first + FETCH_BATCH]))
    missing = [i for i in ids if i not in parts]
    if missing:
        raise ValueError(
            f"BM25 statistics {version} in namespace {STATS_NAMESPACE!r} lack parts {missing[:3]}; "
            "upsert the lexical index again (upsert_lexical)"
        )
    terms: dict[str, tuple[int, int]] = {}
    for record_id in ids:
        for term, index_, df in json.loads(parts[record_id]["terms"]):
            terms[term] = (int(index_), int(df))
    summary = json.loads(meta["summary"])
    return version, BM25Stats.model_validate({**summary, "terms": terms})


def _parts(stats: BM25Stats) -> list[str]:
    parts: list[str] = []
    entries: list[str] = []
    size = 0
    for term, (index, df) in stats.terms.items():
        entry = json.dumps([term, index, df], ensure_ascii=False)
        if entries and size + len(entry.encode()) > PART_BYTES:
            parts.append(f"[{','.join(entries)}]")
            entries, size = [], 0
        entries.append(entry)
        size += len(entry.encode()) + 1
    parts.append(f"[{','.join(entries)}]")
    return parts


def _header(index: Any) -> tuple[str, int] | None:
    fetched = _fetch(index, [HEADER_ID])
    if HEADER_ID not in fetched:
        return None
    return str(fetched[HEADER_ID]["version"]), int(fetched[HEADER_ID]["parts"])


def _fetch(index: Any, ids: list[str]) -> dict[str, dict[str, Any]]:
    response = index.fetch(ids=ids, namespace=STATS_NAMESPACE)
    return {record_id: dict(v.metadata or {}) for record_id, v in response.vectors.items()}


def _part_id(version: str, part: int) -> str:
    return f"bm25-stats-{version}-{part:05d}"
