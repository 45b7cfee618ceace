"""One contract for every lexical backend: bm25s (embedded) and Pinecone BM25 sparse vectors.

Pinecone runs through the real ``pinecone`` SDK against the loopback emulator's sparse index.
Both backends index the same chunks of the same embedded index; a backend that passes can
replace the other as the ``lexical`` tier. Scores agree within ``REL_TOL`` (relative): both
sides compute BM25 in float32, bm25s as ``idf x tfc`` summed per term, Pinecone as a dot
product of float32 ``tfc`` and ``idf`` weights. What any tier must do is public
(``ragtiller.testing.TierContract``, run over both in tests/test_tier_contracts.py); what stays
here is the equivalence of the two engines, which needs bm25s as the reference.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from fixtures.pinecone_emulator import API_KEY, PineconeEmulator
from langchain_core.documents import Document
from pinecone import Pinecone

from ragtiller.core.tiers import Hit, SearchRequest, Tier
from ragtiller.index import EmbeddedIndex
from ragtiller.ingest import build_index, stdlib_documents
from ragtiller.models import HashingEmbedder
from ragtiller.pinecone import PineconeLexicalTier, upsert_lexical

REL_TOL = 1e-4
"""Relative score tolerance between the two backends."""
TOP = 10
QUERIES = [
    "read a json file into a dictionary",
    "cancel a running task",
    "check whether a path exists",
    "ordered dictionary keeps insertion order",
    "partial function with fixed arguments",
    "regular expression match groups",
    "wait with a timeout",
    "context manager exit suppresses the exception",
    "set the log level of a handler",
    "enum member value and name",
    "subprocess return code of the child",
    "dataclass field default factory",
    "sqlite3 cursor execute",
    "ZeroDivisionError",
]


def corpus() -> list[Document]:
    """A few hundred stdlib chunks in two namespaces (every third document in ``api``)."""
    docs = stdlib_documents(max_docs=150)
    for i, doc in enumerate(docs):
        if i % 3 == 0:
            doc.metadata["namespace"] = "api"
    return docs


@pytest.fixture(scope="module")
def index() -> EmbeddedIndex:
    return build_index(corpus(), embedder=HashingEmbedder(dim=16), progress=False)


@pytest.fixture(scope="module")
def pinecone_tier(index: EmbeddedIndex) -> Iterator[PineconeLexicalTier]:
    with (
        PineconeEmulator(dimension=None) as emulator,
        Pinecone(api_key=API_KEY).Index(host=emulator.host) as remote,
    ):
        upsert_lexical(remote, index)
        yield PineconeLexicalTier(remote)


@pytest.fixture(params=["bm25s", "pinecone"])
def tier(request: pytest.FixtureRequest, index: EmbeddedIndex) -> Tier:
    if request.param == "bm25s":
        return embedded(index)
    tier: Tier = request.getfixturevalue("pinecone_tier")
    return tier


def embedded(index: EmbeddedIndex) -> Tier:
    return next(t for t in index.tiers if t.name == "lexical")


def search(tier: Tier, text: str, k: int = TOP, **kwargs: Any) -> list[Hit]:
    return tier.search(SearchRequest(query=text, vector=None, k=k, **kwargs))


def assert_same_ranking(got: list[Hit], expected: list[Hit], everything: dict[str, float]) -> None:
    """The same top k: scores equal rank by rank, ids equal except the order of tied scores.

    At the cut, tied chunks may be swapped for one another: each id returned must score (on
    the reference, ``everything``) what the reference's hit at that rank scores.
    """
    assert len(got) == len(expected)
    for mine, theirs in zip(got, expected, strict=True):
        assert mine["score"] == pytest.approx(theirs["score"], rel=REL_TOL)
        assert everything[mine["id"]] == pytest.approx(theirs["score"], rel=REL_TOL)
    last = expected[-1]["score"] if expected else 0.0
    above = {h["id"] for h in expected if h["score"] > last * (1 + 2 * REL_TOL)}
    assert above <= {h["id"] for h in got}


@pytest.mark.parametrize("namespaces", [None, ["default"], ["api"], ["default", "api"]])
@pytest.mark.parametrize("query", QUERIES)
def test_pinecone_returns_the_bm25s_top_10(
    index: EmbeddedIndex, pinecone_tier: PineconeLexicalTier, query: str, namespaces: Any
) -> None:
    expected = search(embedded(index), query, namespaces=namespaces)
    everything = {h["id"]: h["score"] for h in search(embedded(index), query, k=10_000)}
    got = search(pinecone_tier, query, namespaces=namespaces)
    assert expected, "every query of the contract matches something"
    assert_same_ranking(got, expected, everything)


def tie_groups(hits: list[Hit]) -> list[set[str]]:
    """Ids grouped by equal score (within the tolerance), best group first."""
    groups: list[tuple[float, set[str]]] = []
    for h in hits:
        if groups and h["score"] == pytest.approx(groups[-1][0], rel=REL_TOL):
            groups[-1][1].add(h["id"])
        else:
            groups.append((h["score"], {h["id"]}))
    return [ids for _, ids in groups]


@pytest.mark.parametrize("query", QUERIES)
def test_orders_differ_only_within_exact_ties(
    index: EmbeddedIndex, pinecone_tier: PineconeLexicalTier, query: str
) -> None:
    # one more hit than the cut, so that a tie group cut at 10 is compared whole
    got = tie_groups(search(pinecone_tier, query, k=TOP + 1))
    expected = tie_groups(search(embedded(index), query, k=TOP + 1))
    assert got[:-1] == expected[:-1]


def test_hits_carry_the_chunk_fields(tier: Tier, index: EmbeddedIndex) -> None:
    hits = search(tier, "cancel a running task", namespaces=["default"])
    table = index.store.records
    for hit in hits:
        row = table.row(hit["id"])
        assert row is not None
        reference = table.hit(row, hit["score"])
        assert (hit["text"], hit["doc_id"], hit["parent_id"], hit["source"]) == (
            reference["text"],
            reference["doc_id"],
            reference["parent_id"],
            reference["source"],
        )
        assert hit["parent_id"] is not None  # the parent-child tier can climb from it
        assert hit["metadata"]["namespace"] == "default"
        assert hit["metadata"]["section_path"] == reference["metadata"]["section_path"]


def test_only_chunks_sharing_a_term_are_returned(tier: Tier) -> None:
    assert search(tier, "qwxzv plokm") == []
    assert search(tier, "the and of") == []  # stopwords only
    hits = search(tier, "ZeroDivisionError", k=1000)
    assert hits and all(h["score"] > 0 for h in hits)
    assert all("zerodivisionerror" in h["text"].lower() for h in hits[:3])


def test_namespaces_are_isolated(tier: Tier) -> None:
    api = search(tier, "json file", k=50, namespaces=["api"])
    assert api and {h["metadata"]["namespace"] for h in api} == {"api"}
    assert search(tier, "json file", namespaces=["missing"]) == []


def test_metadata_filter_is_equality(tier: Tier, index: EmbeddedIndex) -> None:
    top = search(tier, "json decoder", k=1)[0]
    hits = search(tier, "json decoder", k=50, filter={"source": top["source"]})
    assert hits and {h["source"] for h in hits} == {top["source"]}


def test_k_caps_the_hits_best_first(tier: Tier) -> None:
    hits = search(tier, "path", k=3)
    assert len(hits) == 3
    assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)
    with pytest.raises(ValueError, match="k must be > 0"):
        search(tier, "path", k=0)


async def test_asearch_equals_search(tier: Tier) -> None:
    request = SearchRequest(query="task timeout", vector=None, k=5, namespaces=["default", "api"])
    assert await tier.asearch(request) == tier.search(request)


def test_building_an_index_under_a_root_handler_prints_no_bm25s_debug_lines() -> None:
    """Issue 44, item 7: the first ingest printed ``DEBUG:bm25s`` lines (bm25s sets its logger
    to DEBUG, and the model export's imports install a root handler)."""
    code = (
        "import logging; logging.basicConfig()\n"
        "from ragtiller.index.lexical import LexicalTier\n"
        "from ragtiller.index.records import RecordTable\n"
        "LexicalTier.build(RecordTable(['a'], ['wings flutter'], [{}]), ['wings flutter'])\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "bm25s" not in run.stderr + run.stdout
