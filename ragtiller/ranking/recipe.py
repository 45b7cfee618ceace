"""The shipped ranking: a short fixed sequence of pure steps over the turn's candidate table.

Fuse widens, rerank narrows. The fuse node runs the scoring steps over every passage a tier
returned (:class:`~ragtiller.ranking.table.CandidateTable`):

1. :func:`fuse`: the passages fused as ``fusion`` says (each tier's raw scores; the dense
   tier's from the search feedback moved);
2. :func:`place`: each passage's ``position``, its rank in the question's own fusion (the
   dense passages at their cosine to the question, not to the moved query), which decides
   how many of the leading positions each document holds: feedback's pull toward its best
   documents ranks them without handing them every position;
3. :func:`rescore`: the best-sentence coverage of the leading passages
   (:class:`~ragtiller.ranking.coverage.SentenceCoverage`).

The rerank stage's free floor then narrows (:func:`narrow`): documents rank by their best
fused passage (Elasticsearch's collapse), each takes the positions its passages hold in the
question's order, and fills them with its own passages, best first by the z-score of their fused
score plus the z-score of their coverage.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ragtiller.core.tiers import Candidate
from ragtiller.ranking.coverage import SentenceCoverage
from ragtiller.ranking.documents import DocKey, doc_key, interleave
from ragtiller.ranking.fusion import FusionMethod, fuse_hits, zscores
from ragtiller.ranking.table import CandidateTable

RESCORE = "passage_rescore"
"""``metadata[RESCORE]`` of a leading passage: its best-sentence coverage of the query."""


def fuse(
    table: CandidateTable,
    *,
    method: FusionMethod,
    rrf_k: int,
    weights: Mapping[str, float] | None,
) -> list[Candidate]:
    """Every passage of ``table``, fused, best first (see :func:`~ragtiller.ranking.fusion.fuse_hits`)."""
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
    """``fused``, each with its ``position``: its 0-based rank in the fusion of the table at
    the question's own scores (:meth:`~CandidateTable.at_question`); its rank in ``fused``
    when no search was moved.

    Example:
        >>> def h(i, s):
        ...     return {"id": i, "text": "", "score": s, "doc_id": i, "parent_id": None,
        ...             "source": "", "metadata": {}}
        >>> table = CandidateTable({"dense": [h("a", .9), h("b", .8)]}, {"dense": {"a": .1, "b": .5}})
        >>> fused = fuse(table, method="zscore", rrf_k=60, weights=None)
        >>> [(c["id"], c["position"]) for c in place(table, fused, method="zscore", rrf_k=60,
        ...                                          weights=None)]
        [('a', 1), ('b', 0)]
    """
    if not table.question:
        return [{**c, "position": rank} for rank, c in enumerate(fused)]
    asked = CandidateTable(table.at_question())
    order = fuse(asked, method=method, rrf_k=rrf_k, weights=weights)
    rank = {c["id"]: i for i, c in enumerate(order)}
    return [{**c, "position": rank[c["id"]]} for c in fused]


def rescore(
    fused: Sequence[Candidate], query: str, coverage: SentenceCoverage | None, *, depth: int
) -> list[Candidate]:
    """``fused`` with the first ``depth`` passages' best-sentence coverage of ``query`` in
    ``metadata[RESCORE]`` (coverage among those passages; none with fewer than two)."""
    head = fused[:depth]
    if coverage is None or len(head) < 2:
        return list(fused)
    values = coverage.scores(query, [c["text"] for c in head])
    scored: list[Candidate] = [
        {**c, "metadata": {**c["metadata"], RESCORE: value}}
        for c, value in zip(head, values, strict=True)
    ]
    return scored + list(fused[depth:])


def documents_by_best(fused: Sequence[Candidate]) -> list[DocKey]:
    """Documents best first, each by its best passage in ``fused`` (its first)."""
    return list(dict.fromkeys(doc_key(c) for c in fused))


def passage_keys(head: Sequence[Candidate]) -> dict[str, float]:
    """Id -> z(fused score) [+ z(coverage), where every passage has one] over ``head``.

    Example:
        >>> head = [{"id": "a", "fused_score": 2.0, "metadata": {RESCORE: 0.0}},
        ...         {"id": "b", "fused_score": 1.0, "metadata": {RESCORE: 1.0}}]
        >>> passage_keys(head)  # type: ignore[arg-type]
        {'a': 0.0, 'b': 0.0}
    """
    keys = dict(
        zip((c["id"] for c in head), zscores([c["fused_score"] for c in head]), strict=True)
    )
    if len(head) < 2 or any(RESCORE not in c["metadata"] for c in head):
        return keys
    coverage = [float(c["metadata"][RESCORE]) for c in head]
    for cand, z in zip(head, zscores(coverage), strict=True):
        keys[cand["id"]] += z
    return keys


def narrow(fused: Sequence[Candidate], top: int) -> list[Candidate]:
    """At most ``top`` passages, best first: documents by their best passage in ``fused``,
    each in the positions its passages hold by ``position``, filled with its own passages by
    :func:`passage_keys` over the first ``top`` of ``fused`` (a passage beyond gets the lowest).

    Example:
        >>> def c(i, d, score, position):
        ...     return {"id": i, "doc_id": d, "fused_score": score, "position": position,
        ...             "metadata": {}}
        >>> fused = [c("a1", "A", 3.0, 1), c("a2", "A", 2.0, 2), c("b1", "B", 1.0, 0)]
        >>> [p["id"] for p in narrow(fused, 3)]  # type: ignore[arg-type]
        ['a1', 'b1', 'a2']
    """
    if not fused:
        return []
    keys = passage_keys(fused[:top])
    floor = min(keys.values())

    def within(group: list[Candidate]) -> list[Candidate]:
        return sorted(group, key=lambda c: -keys.get(c["id"], floor))

    placed = sorted(fused, key=lambda c: c.get("position", 0))
    return interleave(placed, documents_by_best(fused), within)[:top]
