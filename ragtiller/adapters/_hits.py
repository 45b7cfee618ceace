"""LangChain ``Document``s as hits, and the declared meaning of a store's scores.

A :class:`~ragtiller.core.tiers.Hit` score is higher-is-better on the tier's own scale; fusion
then ranks (RRF) or standardises (z-score, min-max) each tier's list on its own. So the one
thing an adapter must get right is the direction, and an affine map keeps both ranks and
z-scores: a distance ``d`` becomes ``1 - d`` (for a cosine distance, the cosine similarity).
A store or retriever that gives no scores is fused by rank: the i-th of n hits (0-based)
scores ``(n - i) / n``, evenly spaced from 1 down to ``1/n``.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from langchain_core.documents import Document

from ragtiller.core.tiers import HIT_FIELDS, Hit

ScoreKind = Literal["similarity", "distance", "none"]
"""``similarity``: higher is better, kept as it is; ``distance``: lower is better, turned into
``1 - d``; ``none``: no scores (or none to trust), fused by rank."""
SCORE_KINDS: tuple[ScoreKind, ...] = ("similarity", "distance", "none")
LIFTED = frozenset(HIT_FIELDS)


@dataclass(frozen=True)
class ScoreSemantics:
    """What a store's raw scores mean.

    Attributes:
        kind: See :data:`ScoreKind`.
        scale: In words, e.g. ``"cosine similarity in [-1, 1]"`` (shown in ``describe()``).
    """

    kind: ScoreKind
    scale: str

    def normalise(self, raw: Sequence[float | None]) -> list[float]:
        """Higher-is-better scores for hits in the store's order, best first.

        Raises:
            ValueError: A score is missing or not finite where the kind needs one.
        """
        if self.kind == "none":
            n = len(raw)
            return [(n - i) / n for i in range(n)]
        scores = []
        for value in raw:
            if value is None or not math.isfinite(value):
                raise ValueError(f"the store returned score {value!r}; expected a {self.scale}")
            scores.append(float(value) if self.kind == "similarity" else 1.0 - float(value))
        return scores


def document_id(doc: Document) -> str:
    """The document's id; without one, a hash of its source and text (stable across calls)."""
    if doc.id:
        return str(doc.id)
    source = str(doc.metadata.get("source", ""))
    digest = hashlib.sha256(f"{source}\x1f{doc.page_content}".encode()).hexdigest()
    return f"sha256:{digest[:32]}"


def to_hit(doc: Document, score: float) -> Hit:
    """``doc`` as a hit: ``doc_id``, ``parent_id`` and ``source`` lifted out of its metadata."""
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


def filterable(doc: Document) -> dict[str, Any]:
    """The metadata a filter reads of ``doc``: its own, with the lifted fields its hit shows."""
    hit = to_hit(doc, 0.0)
    return {**hit["metadata"], **{key: hit[key] for key in LIFTED}}  # type: ignore[literal-required]


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
