"""The three tiers of the embedded index: hits, scores, namespaces, filters, async twins."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import numpy as np
import pytest
from langchain_core.documents import Document

from ragtiller.core.tiers import SearchRequest, Tier
from ragtiller.index import (
    ChunkingConfig,
    DenseTier,
    EmbeddedIndex,
    LexicalConfig,
    LexicalTier,
    ParentChildTier,
)
from ragtiller.index import compute as _compute
from ragtiller.index import lexical as _lexical
from ragtiller.index.lexical import indexed_text
from ragtiller.index.parent_child import WINDOW_SUFFIX
from ragtiller.ingest import build_index
from ragtiller.models import HashingEmbedder

EMBEDDER = HashingEmbedder(dim=128)
FILLER = " ".join(f"filler{i}" for i in range(40))
CORPUS = [
    Document(
        page_content=(
            "# Tasks\n\nA task wraps a coroutine. " + FILLER + " Cancel a task with cancel()."
            "\n\n# Loops\n\nThe event loop runs callbacks."
        ),
        metadata={"source": "asyncio.md", "status": "shipped"},
    ),
    Document(
        page_content="# Queues\n\nA queue put waits when the queue is full.",
        metadata={"source": "queue.md", "namespace": "api", "status": "designed"},
    ),
    Document(
        page_content="Sockets read bytes from the network.",
        metadata={"source": "socket.txt", "status": "shipped"},
    ),
]


@pytest.fixture(scope="module")
def index() -> EmbeddedIndex:
    return build_index(
        CORPUS,
        embedder=EMBEDDER,
        chunking=ChunkingConfig(chunk_tokens=12, overlap_tokens=3),
        progress=False,
    )


def tier(index: EmbeddedIndex, name: str) -> Tier:
    return next(t for t in index.tiers if t.name == name)


def search(t: Tier, query: str, k: int = 10, **kwargs: Any) -> list[Any]:
    return t.search(SearchRequest(query=query, vector=EMBEDDER.embed_query(query), k=k, **kwargs))


def test_tiers_implement_the_protocol(index: EmbeddedIndex) -> None:
    tiers = index.tiers
    assert [(t.name, t.needs_vector) for t in tiers] == [
        ("dense", True),
        ("parent_child", True),
        ("lexical", False),
    ]
    assert all(isinstance(t, Tier) for t in tiers)
    assert isinstance(tiers[0], DenseTier) and isinstance(tiers[1], ParentChildTier)
    assert isinstance(tiers[2], LexicalTier)


def test_dense_scores_are_exact_cosines_best_first(index: EmbeddedIndex) -> None:
    hits = search(tier(index, "dense"), "cancel a task", k=4)
    query = np.array(EMBEDDER.embed_query("cancel a task"))
    records = index.store.records
    cosines = [
        float(query @ np.array(EMBEDDER.embed_query(indexed_text(t, md))))
        for t, md in zip(records.texts, records.metadatas, strict=True)
    ]  # each chunk is embedded as it is indexed: under its heading path
    expected = sorted(zip(cosines, records.ids, strict=True), reverse=True)[:4]
    assert [h["id"] for h in hits] == [i for _, i in expected]
    assert [h["score"] for h in hits] == pytest.approx([s for s, _ in expected], abs=1e-5)


def test_hits_carry_document_fields_and_metadata(index: EmbeddedIndex) -> None:
    hit = search(tier(index, "dense"), "queue put waits", k=1)[0]
    assert (hit["doc_id"], hit["source"]) == ("queue.md", "queue.md")
    assert hit["parent_id"] in index.parents.ids
    assert hit["metadata"]["namespace"] == "api"
    assert hit["metadata"]["status"] == "designed"
    assert hit["metadata"]["section_path"] == ["Queues"]
    parent_text = index.parents.texts[index.parents.row(hit["parent_id"]) or 0]
    assert parent_text[hit["metadata"]["start"] : hit["metadata"]["end"]] == hit["text"]
    assert not {"doc_id", "source", "parent_id"} & set(hit["metadata"])


def test_parent_child_returns_a_bounded_window_around_the_best_child(
    index: EmbeddedIndex,
) -> None:
    children = search(tier(index, "dense"), "cancel a task", k=50)
    windows = search(tier(index, "parent_child"), "cancel a task", k=2)
    best_child = children[0]
    top = windows[0]
    section = index.parents.texts[index.parents.row(best_child["parent_id"])]
    assert top["id"] == best_child["id"] + WINDOW_SUFFIX
    assert top["parent_id"] == best_child["parent_id"]
    assert top["score"] == pytest.approx(best_child["score"])
    assert best_child["text"] in top["text"] and top["text"] in section
    assert top["metadata"]["matched_child_ids"][0] == best_child["id"]
    assert best_child["id"] in top["metadata"]["child_ids"]
    same_parent = [c["id"] for c in children if c["parent_id"] == top["parent_id"]]
    assert set(top["metadata"]["matched_child_ids"]) <= set(same_parent)
    assert len(same_parent) > 1  # the Tasks section really was cut into several children
    assert len({p["id"] for p in windows}) == len(windows) == 2


@pytest.mark.parametrize("budget", [1, 12, 20, 30, 1000])
def test_a_window_grows_by_whole_neighbours_and_never_passes_its_budget(
    index: EmbeddedIndex, budget: int
) -> None:
    pc = tier(index, "parent_child")
    assert isinstance(pc, ParentChildTier)
    top = search(pc.with_window(budget), "cancel a task", k=1)[0]
    section_row = index.parents.row(top["parent_id"])
    section = index.parents.texts[section_row]
    kids = [
        (md["start"], md["end"], i)
        for i, md in zip(index.store.records.ids, index.store.records.metadatas, strict=True)
        if md["parent_id"] == top["parent_id"]
    ]
    start, end = top["metadata"]["start"], top["metadata"]["end"]
    inside = [i for s, e, i in kids if start <= s and e <= end]
    assert inside == top["metadata"]["child_ids"]  # whole children, contiguous
    assert top["text"] == section[start:end]
    records = index.store.records
    best = records.texts[records.row(top["id"].removesuffix(WINDOW_SUFFIX)) or 0]
    assert len(top["text"].split()) <= max(budget, len(best.split()))
    if budget >= len(section.split()):
        assert top["text"] == section  # a section that fits is shown whole


def test_lexical_returns_only_matching_chunks_with_bm25_scores(index: EmbeddedIndex) -> None:
    hits = search(tier(index, "lexical"), "sockets network")
    assert [h["doc_id"] for h in hits] == ["socket.txt"]
    assert hits[0]["score"] > 0
    assert search(tier(index, "lexical"), "the of and") == []  # stopwords only
    assert search(tier(index, "lexical"), "zzzunknown") == []


def test_lexical_stemming_is_configurable() -> None:
    docs = [Document(page_content="cancelled tasks", metadata={"source": "a"})]
    stemmed = build_index(docs, embedder=EMBEDDER, progress=False)
    exact = build_index(
        docs, embedder=EMBEDDER, progress=False, lexical=LexicalConfig(stemmer=None)
    )
    assert len(search(stemmed.tiers[2], "cancel task")) == 1
    assert search(exact.tiers[2], "cancel task") == []


def test_lexical_config_lists_valid_stemmers() -> None:
    with pytest.raises(ValueError, match=r"stemmer must be None or one of \[.*'english'"):
        LexicalConfig(stemmer="klingon")


@pytest.mark.parametrize("name", ["dense", "parent_child", "lexical"])
def test_namespaces_restrict_every_tier(index: EmbeddedIndex, name: str) -> None:
    t = tier(index, name)
    everything = search(t, "queue task loop sockets", k=50)
    api = search(t, "queue task loop sockets", k=50, namespaces=["api"])
    assert {h["metadata"]["namespace"] for h in everything} == {"default", "api"}
    assert api and {h["metadata"]["namespace"] for h in api} == {"api"}
    assert search(t, "queue", namespaces=["nowhere"]) == []
    assert search(t, "queue", namespaces=[]) == []


@pytest.mark.parametrize("name", ["dense", "parent_child", "lexical"])
def test_filter_is_metadata_equality(index: EmbeddedIndex, name: str) -> None:
    t = tier(index, name)
    shipped = search(t, "queue task loop sockets", k=50, filter={"status": "shipped"})
    assert shipped and {h["doc_id"] for h in shipped} == {"asyncio.md", "socket.txt"}
    both = search(t, "queue", k=50, filter={"status": "designed", "namespace": "api"})
    assert {h["doc_id"] for h in both} == {"queue.md"}
    assert search(t, "queue", filter={"status": "retired"}) == []


@pytest.mark.parametrize("name", ["dense", "parent_child", "lexical"])
def test_k_must_be_positive(index: EmbeddedIndex, name: str) -> None:
    with pytest.raises(ValueError, match="k must be > 0, but got 0"):
        search(tier(index, name), "task", k=0)


@pytest.mark.parametrize("name", ["dense", "parent_child"])
def test_vector_tiers_need_a_vector_of_the_right_dimension(index: EmbeddedIndex, name: str) -> None:
    t = tier(index, name)
    with pytest.raises(ValueError, match="needs a query vector"):
        t.search(SearchRequest(query="task", vector=None, k=3))
    with pytest.raises(ValueError, match="query vector has 3 dimensions, the store 128"):
        t.search(SearchRequest(query="task", vector=[1.0, 0.0, 0.0], k=3))


@pytest.mark.parametrize("name", ["dense", "parent_child", "lexical"])
def test_asearch_matches_search_inline_for_small_indexes(index: EmbeddedIndex, name: str) -> None:
    t = tier(index, name)
    request = SearchRequest(
        query="cancel a task", vector=EMBEDDER.embed_query("cancel a task"), k=3
    )
    hits, threads = _asearch_threads(t, request)
    assert hits == t.search(request)
    assert threads == ["MainThread"]


@pytest.mark.parametrize("name", ["dense", "parent_child", "lexical"])
def test_asearch_moves_large_searches_off_the_loop(
    index: EmbeddedIndex, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_compute, "INLINE_ROWS", 0)
    monkeypatch.setattr(_lexical, "INLINE_WORK", -1)
    t = tier(index, name)
    seen: list[str] = []

    def spy(request: SearchRequest) -> Any:
        seen.append(threading.current_thread().name)
        return []

    t.search = spy  # type: ignore[method-assign]
    try:
        asyncio.run(t.asearch(SearchRequest(query="q", vector=None, k=3)))
    finally:
        del t.search  # type: ignore[method-assign]
    assert seen and seen[0] != "MainThread"


def _asearch_threads(t: Tier, request: SearchRequest) -> tuple[list[Any], list[str]]:
    """``t.asearch(request)``'s hits, and the thread each ``search`` call it made ran on."""
    seen: list[str] = []
    original = t.search

    def spy(request: SearchRequest) -> Any:
        seen.append(threading.current_thread().name)
        return original(request)

    t.search = spy  # type: ignore[method-assign]
    try:
        hits = asyncio.run(t.asearch(request))
    finally:
        del t.search  # type: ignore[method-assign]
    return hits, seen


def _search_thread(t: Tier, query: str) -> str:
    return _asearch_threads(t, SearchRequest(query=query, vector=None, k=3))[1][0]


def test_a_large_lexical_tier_searches_a_cheap_query_inline(
    index: EmbeddedIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Above INLINE_ROWS the lexical tier's hop follows the query's postings, known before
    scoring: a query of rare terms stays on the loop, one of common terms leaves it."""
    monkeypatch.setattr(_compute, "INLINE_ROWS", 0)
    t = tier(index, "lexical")
    assert isinstance(t, _lexical.LexicalTier)
    cheap, costly = "a task wraps a coroutine", "the event loop runs callbacks"  # unseen here
    work = t.work(SearchRequest(query=cheap, vector=None, k=3))
    assert work > len(t.records)  # the query's terms have postings
    monkeypatch.setattr(_lexical, "INLINE_WORK", work)
    assert _search_thread(t, cheap) == "MainThread"
    monkeypatch.setattr(_lexical, "INLINE_WORK", work - 1)
    # its scores are kept now: only the selection's pass over the rows is left
    assert t.work(SearchRequest(query=cheap, vector=None, k=3)) == len(t.records)
    assert _search_thread(t, cheap) == "MainThread"
    costly_work = t.work(SearchRequest(query=costly, vector=None, k=3))
    monkeypatch.setattr(_lexical, "INLINE_WORK", costly_work - 1)
    assert _search_thread(t, costly) != "MainThread"


@pytest.mark.parametrize(
    ("scores", "k", "expected"),
    [
        ([0.1, 0.9, 0.5, 0.9], 2, [1, 3]),
        ([0.1, 0.9, 0.5], 10, [1, 2, 0]),
        ([3.0], 1, [0]),
    ],
)
def test_top_k_orders_best_first_with_stable_ties(
    scores: list[float], k: int, expected: list[int]
) -> None:
    assert _compute.top_k(np.array(scores), k).tolist() == expected
