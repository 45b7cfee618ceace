"""The shipped ranking (docs/passages.md): pure steps over the turn's candidate table."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ragtiller.core.tiers import Candidate, Hit, Tier
from ragtiller.index.lexical import LexicalTier, lucene_idf
from ragtiller.policies.schema import FEEDBACK_DEPTH
from ragtiller.ranking.fusion import FusionMethod, fuse_hits, fuse_scores, fused_order, zscores

DocKey = tuple[str, str]
RESCORE = "passage_rescore"  # a leading passage's metadata key: its coverage of the query
_SENTENCE_BREAK = re.compile(r"(?<=[.!?])[\"'\u201d\u2019)\]]*\s+|\n\s*\n")


def doc_key(hit: Hit | Candidate | Mapping[str, Any]) -> DocKey:
    """Ids are unique per namespace."""
    return (str(hit["metadata"].get("namespace", "")), hit["doc_id"])


@dataclass(frozen=True)
class CandidateTable:
    """Each tier's passages, best first, and the question's own scores of a moved tier's."""

    tiers: Mapping[str, Sequence[Hit]]
    question: Mapping[str, Mapping[str, float]] = field(default_factory=dict)

    def head(self, depth: int) -> CandidateTable:
        return replace(self, tiers={t: list(hits[:depth]) for t, hits in self.tiers.items()})

    def moved(
        self, tier: str, hits: Sequence[Hit], question: Mapping[str, float]
    ) -> CandidateTable:
        return replace(self, tiers={**self.tiers, tier: list(hits)}, question={tier: question})

    def at_question(self) -> dict[str, list[Hit]]:
        out = {t: list(hits) for t, hits in self.tiers.items()}
        for tier, scores in self.question.items():
            asked = []
            for hit in out[tier]:
                scored = hit.copy()
                scored["score"] = scores.get(hit["id"], hit["score"])
                asked.append(scored)
            out[tier] = sorted(asked, key=lambda h: -h["score"])
        return out


class SentenceCoverage:
    """``max over sentences of idf(query terms in it) / idf(query)``; a term's IDF is the corpus's
    times its IDF among the passages scored together (the rarer terms tell them apart)."""

    def __init__(self, lexical: LexicalTier) -> None:
        self.lexical = lexical

    @classmethod
    def from_tiers(cls, tiers: Iterable[Tier]) -> SentenceCoverage | None:
        lexical = next((t for t in tiers if isinstance(t, LexicalTier)), None)
        return None if lexical is None else cls(lexical)

    def scores(self, query: str, texts: Sequence[str]) -> list[float]:
        """In [0, 1]; all 0 without query terms."""
        terms = set(self.lexical.query_terms(query))
        if not terms:
            return [0.0] * len(texts)
        sets = [self.lexical.term_set(text) for text in texts]
        n = len(sets)
        weights = {
            t: w * lucene_idf(sum(t in f for f in sets), n)
            for t, w in self.lexical.idf(terms).items()
        }
        total = math.fsum(weights.values())
        out: list[float] = []
        for text in texts:
            best = 0.0
            for sentence in _SENTENCE_BREAK.split(text):
                found = terms.intersection(self.lexical.term_set(sentence))
                best = max(best, math.fsum(weights[t] for t in found))
            out.append(best / total)
        return out


def rocchio_vector(query: Sequence[float], feedback: np.ndarray, *, weight: float) -> list[float]:
    """``q + weight * mean(feedback rows)``, unit length."""
    q = np.asarray(query, dtype=np.float64)
    q = q / (np.linalg.norm(q) or 1.0)
    moved = q + weight * np.asarray(feedback, dtype=np.float64).mean(axis=0)
    norm = float(np.linalg.norm(moved))
    return (moved / norm if norm else q).tolist()  # type: ignore[no-any-return]


def feedback_passages(
    table: CandidateTable,
    dense: str,
    lexical: str | None,
    *,
    docs: int,
    method: FusionMethod,
    rrf_k: int,
    weights: Mapping[str, float] | None,
) -> list[str]:
    """The best dense passage of each of the top ``docs`` documents, ``FEEDBACK_DEPTH`` deep."""
    first = table.head(FEEDBACK_DEPTH).tiers
    names = [dense] if lexical is None or lexical not in first else [dense, lexical]
    scored: dict[str, dict[DocKey, float]] = {}
    for tier in names:  # each document's best score, in order of its best hit
        scored[tier] = {}
        for hit in first[tier]:
            scored[tier].setdefault(doc_key(hit), float(hit["score"]))
    best: dict[DocKey, str] = {}
    for hit in first[dense]:
        best.setdefault(doc_key(hit), hit["id"])
    fused = fuse_scores(scored, method=method, rrf_k=rrf_k, weights=weights)
    order: dict[DocKey, int] = {}
    for tier in names:
        for key in scored[tier]:
            order.setdefault(key, len(order))
    ranked = sorted(fused, key=lambda key: (-fused[key], order[key]))
    return [best[key] for key in ranked if key in best][:docs]


def fuse(
    table: CandidateTable, *, method: FusionMethod, rrf_k: int, weights: Mapping[str, float] | None
) -> list[Candidate]:
    total = sum(len(hits) for hits in table.tiers.values())
    return fuse_hits(table.tiers, method=method, cap=total, rrf_k=rrf_k, weights=weights)


def place(
    table: CandidateTable,
    fused: Sequence[Candidate],
    *,
    method: FusionMethod,
    rrf_k: int,
    weights: Mapping[str, float] | None,
) -> list[Candidate]:
    """``fused``, each with its rank in the fusion at the question's own scores (``position``)."""
    if not table.question:
        return [{**c, "position": rank} for rank, c in enumerate(fused)]
    order, _, _ = fused_order(table.at_question(), method=method, rrf_k=rrf_k, weights=weights)
    rank = {id_: i for i, id_ in enumerate(order)}
    return [{**c, "position": rank[c["id"]]} for c in fused]


def rescore(
    fused: Sequence[Candidate], query: str, coverage: SentenceCoverage | None, *, depth: int
) -> list[Candidate]:
    """``fused``, the first ``depth`` passages with their coverage of ``query`` (of two or more)."""
    head = fused[:depth]
    if coverage is None or len(head) < 2:
        return list(fused)
    values = coverage.scores(query, [c["text"] for c in head])
    scored: list[Candidate] = [
        {**c, "metadata": {**c["metadata"], RESCORE: value}}
        for c, value in zip(head, values, strict=True)
    ]
    return scored + list(fused[depth:])


def passage_keys(head: Sequence[Candidate]) -> dict[str, float]:
    """Id -> z(fused score) [+ z(coverage), where every passage has one] over ``head``."""
    keys = dict(
        zip((c["id"] for c in head), zscores([c["fused_score"] for c in head]), strict=True)
    )
    if len(head) < 2 or any(RESCORE not in c["metadata"] for c in head):
        return keys
    coverage = [float(c["metadata"][RESCORE]) for c in head]
    for cand, z in zip(head, zscores(coverage), strict=True):
        keys[cand["id"]] += z
    return keys


def interleave(
    passages: Sequence[Candidate],
    documents: Sequence[DocKey],
    within: Callable[[list[Candidate]], list[Candidate]] | None = None,
) -> list[Candidate]:
    """Each document's passages in the positions they hold (Elasticsearch's collapse)."""
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


def narrow(fused: Sequence[Candidate], top: int) -> list[Candidate]:
    """At most ``top`` passages: documents by their best, each filled by :func:`passage_keys`."""
    if not fused:
        return []
    keys = passage_keys(fused[:top])
    floor = min(keys.values())

    def within(group: list[Candidate]) -> list[Candidate]:
        return sorted(group, key=lambda c: -keys.get(c["id"], floor))

    placed = sorted(fused, key=lambda c: c.get("position", 0))
    documents = list(dict.fromkeys(doc_key(c) for c in fused))  # each by its best (first) passage
    return interleave(placed, documents, within)[:top]
