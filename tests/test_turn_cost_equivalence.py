"""The cheaper turn returns what the turn returned before: the same rows, scores and documents.

Each cut of issue 28's turn cost is compared here with the code it replaced (kept as the
reference: a partition of every score, a hit built per row), over a table large enough for the
fast paths and with ties, namespaces and filters.
"""

from __future__ import annotations

import numpy as np
import pytest

from ragtiller.core.tiers import Candidate, Hit, SearchRequest
from ragtiller.index import NumpyVectorStore, compute
from ragtiller.index.compute import SharedScans
from ragtiller.index.lexical import (
    DENSE_COLUMNS,
    LexicalConfig,
    LexicalTier,
    analyze,
    bm25_scores,
)
from ragtiller.models import HashingEmbedder
from ragtiller.ranking import fusion
from ragtiller.ranking.fusion import FusionMethod

ROWS = 6000
DIM = 32
WORDS = ["wing", "flutter", "panel", "shock", "wave", "heat", "nozzle", "jet"]
QUERIES = ["wing flutter", "shock wave heat nozzle", "jet", "panel w17x wing", "w3x w4x w5x"]
SCOPES: list[dict[str, object]] = [
    {},
    {"namespaces": ["default"]},
    {"namespaces": ["other"]},
    {"filter": {"tenant": "acme"}},
    {"namespaces": ["default"], "filter": {"tenant": ["globex"]}},
]


def _metadata(row: int) -> dict[str, object]:
    md: dict[str, object] = {"tenant": "acme" if row % 3 else "globex", "title": f"T{row // 7}"}
    if row % 11:  # some rows name no document: the row id is their document
        md["doc_id"] = f"d{row // 5}"
    if row % 4 == 0:  # and some no namespace
        md["namespace"] = "other" if row % 8 == 0 else "default"
    return md


@pytest.fixture(scope="module")
def store() -> NumpyVectorStore:
    rng = np.random.default_rng(28)
    ranks = np.minimum(rng.zipf(1.4, size=(ROWS, 12)), 60) - 1
    vocab = WORDS + [f"w{i}x" for i in range(60)]
    texts = [" ".join(vocab[r] for r in row) for row in ranks]
    texts[100:140] = [texts[99]] * 40  # equal texts: equal BM25 scores, ties at any k
    vectors = rng.standard_normal((ROWS, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return NumpyVectorStore.from_vectors(
        texts,
        vectors,
        HashingEmbedder(DIM),
        [_metadata(r) for r in range(ROWS)],
        ids=[f"c{r}" for r in range(ROWS)],
    )


@pytest.fixture(scope="module")
def lexical(store: NumpyVectorStore) -> LexicalTier:
    return LexicalTier.build(store.records, list(store.records.texts))


def _old_search(tier: LexicalTier, request: SearchRequest) -> list[Hit]:
    """``LexicalTier.search`` as it was: the positive rows gathered, then one partition."""
    scores = tier.row_scores(request)
    rows = np.flatnonzero(scores > 0)
    if not len(rows):
        return []
    best = rows[compute._partitioned(scores[rows], request.k)]
    return [tier.records.hit(r, scores[r]) for r in best.tolist()]


@pytest.mark.parametrize("k", [1, 5, 36, 100])
def test_lexical_search_returns_the_old_selection(lexical: LexicalTier, k: int) -> None:
    for query in QUERIES:
        for scope in SCOPES:
            request = SearchRequest(query=query, vector=None, k=k, **scope)  # type: ignore[arg-type]
            got, want = lexical.search(request), _old_search(lexical, request)
            assert got == want, (query, scope)


def test_top_k_positive_is_the_top_k_of_the_positive_scores() -> None:
    rng = np.random.default_rng(5)
    for trial in range(300):
        n = int(rng.integers(compute.THRESHOLD_MIN_ROWS, 30_000))
        scores = np.zeros(n, dtype=np.float32)
        touched = rng.choice(n, int(rng.integers(0, n)), replace=False)
        values = rng.random(len(touched)) if trial % 2 else rng.integers(1, 9, len(touched))
        scores[touched] = values
        if trial % 5 == 0:
            scores[rng.choice(n, 10)] = -1.0  # BM25 variants can score below zero
        k = int(rng.integers(1, 200))
        rows = np.flatnonzero(scores > 0)
        want = rows[compute._partitioned(scores[rows], k)] if len(rows) else rows
        assert compute.top_k_positive(scores, k).tolist() == want.tolist()


@pytest.mark.parametrize("method", ["lucene", "robertson", "atire", "bm25l", "bm25+"])
def test_bm25_scores_are_bm25s_own(store: NumpyVectorStore, method: str) -> None:
    config = LexicalConfig(method=method)
    tier = LexicalTier.build(store.records, list(store.records.texts)[:ROWS], config)
    retriever = tier._retriever
    columns = SharedScans(DENSE_COLUMNS)
    for query in [*QUERIES, "wing wing jet", "unknownterm wing"] * 2:  # columns made, then kept
        tokens = analyze([query], config)[0]
        want = retriever.get_scores(tokens)
        for got in (
            bm25_scores(retriever, tokens),
            bm25_scores(retriever, tokens, columns=columns),
        ):
            assert got.dtype == want.dtype
            assert np.array_equal(got, want), (method, query)
    assert columns.holds(retriever.vocab_dict["wing"])  # a common term took the column path
    assert not columns.holds(retriever.vocab_dict["nozzl"])  # a rarer one its postings


def test_a_shared_deeper_selection_serves_every_k_as_selected_alone(
    store: NumpyVectorStore,
) -> None:
    """The turn's search (k 36) reads the first rows of Rocchio's (k 100) selection, or of its
    own made deeper: the same rows as selecting k alone, ties at the k-th place included."""
    tier = LexicalTier.build(store.records, list(store.records.texts))
    ties = 0
    for query in [*QUERIES, "wing", "w0x"]:
        for scope in SCOPES:
            for k in (100, 36, 1, 2, 5, 37, 99, 140):
                request = SearchRequest(query=query, vector=None, k=k, **scope)  # type: ignore[arg-type]
                want = _old_search(tier, request)
                assert tier.search(request) == want, (query, scope, k)
                rows, scores = tier.search_rows(request)
                assert scores.tolist() == [h["score"] for h in want]
                deep = compute.top_k_positive(tier.row_scores(request), 100)
                values = tier.row_scores(request)[deep]
                ties += int(k < len(deep) and values[k - 1] == values[k])
                assert rows.tolist() == [tier.records.row(h["id"]) for h in want]
                assert not rows.flags.writeable  # kept and shared: read-only
    assert ties  # the tie fallback was taken


def test_query_terms_are_the_analysis_of_the_query(lexical: LexicalTier) -> None:
    for query in [*QUERIES, "", "The tasks, the tasks!"]:
        assert list(lexical.query_terms(query)) == analyze([query], lexical.config)[0]


def _old_fuse_hits(
    hits_by_tier: dict[str, list[Hit]],
    *,
    method: FusionMethod,
    cap: int,
    weights: dict[str, float] | None,
) -> list[Candidate]:
    """``fuse_hits`` as it was: a rank table per tier and a tie-break per id."""
    scored = {tier: fusion._best_scores(hits) for tier, hits in hits_by_tier.items()}
    fused = fusion.fuse_scores(scored, method=method, weights=weights)
    z_by_tier = {
        tier: dict(zip(s, fusion.zscores(list(s.values())), strict=True))
        for tier, s in scored.items()
    }
    first_hit: dict[str, Hit] = {}
    for hits in hits_by_tier.values():
        for hit in hits:
            first_hit.setdefault(hit["id"], hit)
    ranks = {
        tier: {doc_id: rank for rank, doc_id in enumerate(s, start=1)} for tier, s in scored.items()
    }
    tier_order = list(scored)

    def tie_break(doc_id: str) -> tuple[float, int, int, str]:
        best = min((r[doc_id], tier_order.index(t)) for t, r in ranks.items() if doc_id in r)
        return (-fused[doc_id], best[0], best[1], doc_id)

    return [
        Candidate(
            id=doc_id,
            text=first_hit[doc_id]["text"],
            doc_id=first_hit[doc_id]["doc_id"],
            parent_id=first_hit[doc_id]["parent_id"],
            source=first_hit[doc_id]["source"],
            metadata=dict(first_hit[doc_id]["metadata"]),
            tier_scores={t: s[doc_id] for t, s in scored.items() if doc_id in s},
            tier_ranks={t: r[doc_id] for t, r in ranks.items() if doc_id in r},
            tier_z={t: z[doc_id] for t, z in z_by_tier.items() if doc_id in z},
            fused_score=fused[doc_id],
        )
        for doc_id in sorted(fused, key=tie_break)[:cap]
    ]


@pytest.mark.parametrize("method", ["rrf", "zscore", "minmax"])
def test_fuse_hits_fuses_as_it_did(method: FusionMethod) -> None:
    rng = np.random.default_rng(11)
    for trial in range(200):
        tiers: dict[str, list[Hit]] = {}
        for tier in ("dense", "lexical", "parent_child")[: 1 + trial % 3]:
            n = int(rng.integers(0, 40))
            ids = rng.choice(60, n).tolist()  # repeats: a tier's later hit of an id is dropped
            scores = np.sort(rng.integers(0, 6, n) / 2 if trial % 2 else rng.random(n))[::-1]
            tiers[tier] = [
                Hit(
                    id=f"c{i}",
                    text=f"t{i}",
                    score=float(s),
                    doc_id=f"d{i % 7}",
                    parent_id=None,
                    source="",
                    metadata={"at": tier},
                )
                for i, s in zip(ids, scores, strict=True)
            ]
        weights = None if trial % 4 == 0 else {"dense": 1.0, "lexical": 0.5, "parent_child": 0.0}
        cap = int(rng.integers(1, 80))
        got = fusion.fuse_hits(tiers, method=method, cap=cap, weights=weights)
        assert got == _old_fuse_hits(tiers, method=method, cap=cap, weights=weights)
