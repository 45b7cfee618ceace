"""Passages answer, documents rank: the turn's candidate order, and a cross-encoder-free re-score.

Tiers return passages (child chunks). They are fused at passage level; documents are ranked
from the same hits (``doc_aggregation``), and each document's passages fill the positions its
passages earned in the fused order, best first by the passage re-score. Section-level hits
(BM25 over whole sections) vote for their document's rank only: a section is never returned.

The re-score (``fusion.passage_rescore: sentence``) asks how much of the query one sentence of
a passage holds: the share of the query terms' IDF mass found in its best sentence. Which
passage of a long document answers a question is mostly decided by such a sentence; which
document ranks first is not, so the re-score orders passages within a document only.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal

from ragtiller.core.tiers import QUERY_SCORE, Candidate, Hit, Scored, SearchRequest, wrapper_chain
from ragtiller.index.lexical import LexicalTier, lucene_idf
from ragtiller.policies.schema import FusionConfig
from ragtiller.ranking.documents import (
    DocKey,
    doc_key,
    document_order,
    interleave,
    is_section_hit,
)
from ragtiller.ranking.fusion import fuse_hits, zscores
from ragtiller.ranking.neighbours import VectorLookup, neighbour_document_order
from ragtiller.ranking.units import has_unit_votes, unit_document_order
from ragtiller.ranking.vector_table import VectorTable

PassageScores = Literal["moved", "query"]
"""Which dense scores a passage step reads: Rocchio's moved query's, or the question's own."""

_SENTENCE_BREAK = re.compile(r"(?<=[.!?])[\"'\u201d\u2019)\]]*\s+|\n\s*\n")


class SentenceCoverage:
    """Best-sentence query coverage: ``max over sentences of idf(query terms in it) / idf(query)``.

    Terms are analysed as the lexical tier analyses them (stopwords, stemmer); IDF is that
    tier's corpus statistics (Lucene's ``log(1 + (N - df + 0.5) / (df + 0.5))``). With
    ``local``, each term's weight is its corpus IDF times its IDF among the texts scored
    together (the candidate passages): inside a long article every passage names the article's
    topic, and the terms that tell its passages apart are the rarer ones among them.

    Args:
        lexical: An embedded BM25 tier (its analysis and document frequencies are read).
        local: Weigh terms by their rarity among the scored texts too.
    """

    def __init__(self, lexical: LexicalTier, *, local: bool = False) -> None:
        self.lexical = lexical
        self.local = local

    @classmethod
    def from_tiers(cls, tiers: Iterable[Any], *, local: bool = False) -> SentenceCoverage | None:
        """Over the first embedded BM25 tier among ``tiers`` (wrappers are unwrapped), or None."""
        for tier in tiers:
            lexical = next((t for t in wrapper_chain(tier) if isinstance(t, LexicalTier)), None)
            if lexical is not None:
                return cls(lexical, local=local)
        return None

    def scores(self, query: str, texts: Sequence[str]) -> list[float]:
        """Each text's best-sentence coverage of ``query``, in [0, 1]; all 0 without query terms.

        Example:
            >>> from ragtiller.index.records import RecordTable
            >>> texts = ["Wings flutter. Panels bend.", "Panels bend and wings flutter."]
            >>> records = RecordTable(["a", "b"], texts, [{}, {}])
            >>> cover = SentenceCoverage(LexicalTier.build(records, texts))
            >>> cover.scores("wing flutter panel", texts)
            [0.6666666666666666, 1.0]
        """
        terms = set(self.lexical.query_terms(query))
        if not terms:
            return [0.0] * len(texts)
        weights = self.lexical.idf(terms)
        if self.local:
            sets = [self.lexical.term_set(text) for text in texts]
            n = len(sets)
            weights = {t: w * lucene_idf(sum(t in f for f in sets), n) for t, w in weights.items()}
        total = math.fsum(weights.values())
        out: list[float] = []
        for text in texts:
            best = 0.0
            for sentence in _SENTENCE_BREAK.split(text):
                found = terms.intersection(self.lexical.term_set(sentence))
                best = max(best, math.fsum(weights[t] for t in found))
            out.append(best / total)
        return out


def rank_passages(
    hits_by_tier: Mapping[str, Sequence[Hit]],
    fusion: FusionConfig,
    *,
    cap: int,
    query: str,
    rescore: SentenceCoverage | None = None,
    weights: Mapping[str, float] | None = None,
    positions: PassageScores = "moved",
    order: PassageScores = "moved",
    missed: Mapping[str, Mapping[str, Scored]] | None = None,
    vectors: VectorLookup | None = None,
    report: dict[str, Any] | None = None,
) -> list[Candidate]:
    """At most ``cap`` passages, best first: fused, placed under ranked documents, re-scored.

    With ``doc_aggregation: off`` the fused passage order stands. With ``max`` a document ranks
    by its best fused passage (Elasticsearch's collapse); with ``sum``, or when a tier scored
    whole sections, by :func:`~ragtiller.ranking.documents.document_order`. Documents hold the
    positions of :func:`~ragtiller.ranking.documents.interleave`; within a document, passages are
    ordered by the z-score of their fused score plus, with ``rescore``, the z-score of their best-sentence
    coverage (both over the first ``cap`` fused passages; a passage beyond gets the lowest).
    When dense hits carry their question score, ``positions="query"`` takes the positions and
    ``order="query"`` that order from the fusion at those scores (``feedback.passage_positions``
    and ``passage_scores``), while the documents still rank by the moved (feedback) fusion.
    ``weights`` are the tiers' fusion weights by name (default ``fusion.tier_weights``; the fuse
    node passes them resolved by role, :func:`~ragtiller.ranking.fusion.weights_by_name`).
    ``missed``: per tier, its own scores of passages it did not return (``fusion.misses:
    exact``, :func:`score_misses`), which z-score fusion reads instead of the tier's floor.
    Z-scores take each tier's mean and spread from its best ``fusion.scale_depth`` hits.
    ``vectors``: the dense tier's vectors of the turn's passages, for ``fusion.neighbour_weight``
    (:func:`~ragtiller.ranking.neighbours.neighbour_document_order`); ``report`` receives
    ``neighbours``, what that step did.
    """
    passages = passage_hits(hits_by_tier)
    sections = any(len(passages[t]) < len(hits) for t, hits in hits_by_tier.items())
    passages = {t: hits for t, hits in passages.items() if hits}
    if not passages:
        return []
    weights = (fusion.tier_weights if weights is None else weights) or None
    total = sum(len(h) for h in passages.values())
    extra = {t: {i: m.score for i, m in scored.items()} for t, scored in (missed or {}).items()}
    fused = _fuse(passages, fusion, total, weights, extra)
    if fusion.doc_aggregation == "off":
        return fused[:cap]
    documents: list[DocKey] = []  # max over passages alone: a document ranks by its best passage
    basis = "passages"
    if fusion.doc_aggregation == "max" and not sections and has_unit_votes(passages):
        basis = "units"
        documents = unit_document_order(
            passages,
            method=fusion.method,
            rrf_k=fusion.rrf_k,
            weights=weights,
            margin=fusion.margin,
        )
    elif fusion.doc_aggregation == "sum" or sections:
        basis = "sections" if sections else "summed scores"
        documents = document_order(
            hits_by_tier,
            fusion.doc_aggregation,
            method=fusion.method,
            rrf_k=fusion.rrf_k,
            weights=weights,
            margin=fusion.margin,
        )
    question = (
        _question_fusion(passages, fusion, total, weights, missed)
        if "query" in (positions, order)
        else None
    )
    if fusion.neighbour_weight > 0 and basis == "passages":
        documents = _neighbour_order(fused, fusion, vectors, report)
    elif fusion.neighbour_weight > 0 and report is not None:
        report["neighbours"] = f"skipped: documents rank by their {basis}"
    if question is not None and not documents:  # feedback still ranks them: best moved passage
        documents = list(dict.fromkeys(doc_key(c) for c in fused))
    placed = question if question is not None and positions == "query" else fused
    ordered = question if question is not None and order == "query" else fused
    keys = _passage_keys(ordered[:cap], query, rescore)
    floor = min(keys.values())

    def within(group: list[Candidate]) -> list[Candidate]:
        return sorted(group, key=lambda c: -keys.get(c["id"], floor))

    return interleave(placed, documents, within)[:cap]


def passage_hits(hits_by_tier: Mapping[str, Sequence[Hit]]) -> dict[str, list[Hit]]:
    """Each tier's passage hits: section-level hits vote for documents and are never passages."""
    return {t: [h for h in hits if not is_section_hit(h)] for t, hits in hits_by_tier.items()}


def score_misses(
    tiers: Mapping[str, Any],
    requests: Mapping[str, SearchRequest],
    hits_by_tier: Mapping[str, Sequence[Hit]],
    remote: Mapping[str, VectorTable | Exception] | None = None,
) -> tuple[dict[str, dict[str, Scored]], dict[str, str]]:
    """Each tier's own scores of the turn's passages it did not return (``fusion.misses:
    exact``), and what each tier did, for the stage record.

    A tier is asked when it returned passages and can score given chunks (``score_ids``), with
    the request it searched with (its scope: it scores nothing its search could not have
    returned). A remote dense tier (Pinecone) scores them from ``remote``: the vectors the fuse
    node fetched for the turn, or the error that fetch raised. A tier that fails here keeps
    the floor for its misses; the turn goes on.
    """
    passages = passage_hits(hits_by_tier)
    union = list(dict.fromkeys(h["id"] for hits in passages.values() for h in hits))
    scored: dict[str, dict[str, Scored]] = {}
    report: dict[str, str] = {}
    for name, found in passages.items():
        request, fetched = requests.get(name), (remote or {}).get(name)
        if not found or request is None:
            continue
        if isinstance(fetched, Exception):
            report[name] = _failed(fetched)
            continue
        score_ids = _scorer(tiers.get(name), request, fetched)
        if score_ids is None:
            continue
        own = {h["id"] for h in found}
        missing = [i for i in union if i not in own]
        try:
            scored[name] = dict(score_ids(missing)) if missing else {}
        except Exception as e:  # exact misses improve a fusion, never cost the turn
            report[name] = _failed(e)
            continue
        report[name] = f"{len(scored[name])} of {len(missing)} scored"
    return scored, report


def _scorer(
    tier: Any, request: SearchRequest, fetched: VectorTable | None
) -> Callable[[Sequence[str]], Mapping[str, Scored]] | None:
    """How a tier scores given ids in its request's scope: from the vectors fetched for the
    turn, else its own ``score_ids``; None when it cannot."""
    if fetched is None:
        score_ids = getattr(tier, "score_ids", None)
        return (lambda ids: score_ids(request, ids)) if callable(score_ids) else None
    vector = request.vector
    return None if vector is None else (lambda ids: fetched.scores(vector, ids))


def _failed(error: Exception) -> str:
    """How the stage record reports a step that failed (and left the turn as it was)."""
    return f"failed: {type(error).__name__}: {error}"


def _question_fusion(
    passages: Mapping[str, Sequence[Hit]],
    fusion: FusionConfig,
    total: int,
    weights: Mapping[str, float] | None,
    missed: Mapping[str, Mapping[str, Scored]] | None = None,
) -> list[Candidate] | None:
    """The passages fused with each moved hit at its question score (``QUERY_SCORE``); None
    when no hit carries one (feedback did not move, or no field asked for the question's)."""
    if not any(QUERY_SCORE in h["metadata"] for hits in passages.values() for h in hits):
        return None
    unmoved = {
        tier: sorted((_at_question(h) for h in hits), key=lambda h: -h["score"])
        for tier, hits in passages.items()
    }
    extra = {
        tier: {i: m.score if m.question is None else m.question for i, m in scored.items()}
        for tier, scored in (missed or {}).items()
    }
    return _fuse(unmoved, fusion, total, weights, extra)


def _fuse(
    passages: Mapping[str, Sequence[Hit]],
    fusion: FusionConfig,
    total: int,
    weights: Mapping[str, float] | None,
    extra: Mapping[str, Mapping[str, float]],
) -> list[Candidate]:
    """Every passage, fused as ``fusion`` says (the moved fusion and the question's alike)."""
    return fuse_hits(
        passages,
        method=fusion.method,
        cap=total,
        rrf_k=fusion.rrf_k,
        weights=weights,
        margin=fusion.margin,
        scale=fusion.scale_depth,
        extra=extra,
    )


def _neighbour_order(
    fused: Sequence[Candidate],
    fusion: FusionConfig,
    vectors: VectorLookup | None,
    report: dict[str, Any] | None,
) -> list[DocKey]:
    """Documents by their best neighbour-regularized passage; [] (fused order) without vectors."""
    if vectors is None:
        if report is not None:
            report["neighbours"] = "skipped: no dense vectors for this turn's passages"
        return []
    try:
        documents, regularized = neighbour_document_order(
            fused,
            vectors,
            weight=fusion.neighbour_weight,
            k=fusion.neighbour_k,
            depth=fusion.neighbour_depth,
        )
    except Exception as e:  # the neighbours refine a ranking, never cost the turn
        if report is not None:
            report["neighbours"] = _failed(e)
        return []
    if report is not None:
        report["neighbours"] = f"{regularized} passages regularized"
    return documents


def _at_question(hit: Hit) -> Hit:
    out = hit.copy()
    out["score"] = float(hit["metadata"].get(QUERY_SCORE, hit["score"]))
    return out


def _passage_keys(
    head: Sequence[Candidate], query: str, rescore: SentenceCoverage | None
) -> dict[str, float]:
    """Id -> z(fused score) [+ z(best-sentence coverage)] over ``head``; sets the coverage."""
    keys = dict(
        zip((c["id"] for c in head), zscores([c["fused_score"] for c in head]), strict=True)
    )
    if rescore is None or len(head) < 2:
        return keys
    coverage = rescore.scores(query, [c["text"] for c in head])
    for cand, value, z in zip(head, coverage, zscores(coverage), strict=True):
        cand["metadata"]["passage_rescore"] = value
        keys[cand["id"]] += z
    return keys
