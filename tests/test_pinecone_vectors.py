"""Exact misses and neighbour regularization over Pinecone: the turn's vectors fetched once.

The embedded dense tier reads its vectors in memory; Pinecone keeps them on the server, so the
fuse node fetches the turn's passages (``PineconeTier.afetch_vectors``) in the request's scope,
off the event loop and under the tier's deadline. Tested through the real SDK against the
loopback emulator.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from fixtures.pinecone_copy import pinecone_copy
from fixtures.pinecone_emulator import PineconeEmulator
from fixtures.topics import threaded_and_resumed, topic_corpus
from langchain_core.documents import Document
from langgraph.checkpoint.memory import InMemorySaver

from ragtiller import build_graph, load_policy
from ragtiller.core.tiers import SearchRequest
from ragtiller.eval.variants import with_overrides
from ragtiller.index import EmbeddedIndex
from ragtiller.ingest import build_index
from ragtiller.models import HashingEmbedder
from ragtiller.pinecone import PineconeTier
from ragtiller.policies.schema import RetrievalPolicy
from ragtiller.ranking.vector_table import VectorTable

DIM = 128
EMBEDDER = HashingEmbedder(dim=DIM)
QUERY = "flutter of a heated panel near a shock"
SWITCHES = {"fusion.misses": "exact", "fusion.neighbour_weight": 0.4}
NO_FEEDBACK = {
    "feedback.dense": "off",
    "budgets.candidate_multiplier": 1,
    "budgets.candidate_floor": 4,
}
"""Rocchio moves only an embedded dense tier's query, so both graphs compared go without it;
and each tier returns 5 of the 16 chunks, so each misses some the other returned."""


def policy(**changes: Any) -> RetrievalPolicy:
    return with_overrides(load_policy(), {**NO_FEEDBACK, **changes})


@pytest.fixture(scope="module")
def embedded() -> EmbeddedIndex:
    tenants = [
        Document(d.page_content, metadata={**d.metadata, "tenant": tenant})
        for tenant in ("acme", "globex")
        for d in topic_corpus()
        if (tenant == "acme") == ("flutter" in d.page_content or "shock" in d.page_content)
    ]
    return build_index(topic_corpus("default") + tenants, embedder=EMBEDDER, progress=False)


@pytest.fixture
def emulator() -> Iterator[PineconeEmulator]:
    with PineconeEmulator(dimension=DIM) as server:
        yield server


@pytest.fixture
def pinecone_dense(emulator: PineconeEmulator, embedded: EmbeddedIndex) -> Iterator[PineconeTier]:
    with pinecone_copy(emulator, embedded, EMBEDDER, timeout_s=0.5) as tier:
        yield tier


def graph(dense: Any, embedded: EmbeddedIndex, pol: RetrievalPolicy, **kw: Any) -> Any:
    others = [t for t in embedded.tiers if t.name != "dense"]
    return build_graph(pol, require_tenant=False, tiers=[dense, *others], embedder=EMBEDDER, **kw)


def fuse_detail(out: dict[str, Any]) -> dict[str, Any]:
    return dict(next(s for s in out["stages"] if s["step"] == "fuse")["detail"])


def ids(out: dict[str, Any]) -> list[str]:
    return [d.id for d in out["documents"]]


def test_the_fetch_reads_only_the_requests_namespaces_and_tenant(
    pinecone_dense: PineconeTier, embedded: EmbeddedIndex
) -> None:
    records = embedded.store.records
    everything = list(records.ids)
    vector = EMBEDDER.embed_query(QUERY)
    acme = SearchRequest(QUERY, vector, 5, namespaces=["default"], filter={"tenant": "acme"})
    table = asyncio.run(pinecone_dense.afetch_vectors(acme, everything))
    tenants = {records.hit(records.ids.index(i), 0.0)["metadata"].get("tenant") for i in table.ids}
    assert table.ids and tenants == {"acme"}
    # the rows are the stored vectors, scaled to unit length
    row = records.ids.index(table.ids[0])
    stored = np.asarray(embedded.store.vectors[row], dtype=np.float32)
    assert np.allclose(table.rows[0], stored / np.linalg.norm(stored), atol=1e-5)
    nowhere = SearchRequest(QUERY, vector, 5, namespaces=["elsewhere"])
    assert asyncio.run(pinecone_dense.afetch_vectors(nowhere, everything)).ids == ()


def test_a_table_scores_and_looks_up_as_the_embedded_dense_tier_does(
    embedded: EmbeddedIndex,
) -> None:
    dense = next(t for t in embedded.tiers if t.name == "dense")
    request = SearchRequest(QUERY, EMBEDDER.embed_query(QUERY), 5, namespaces=["default"])
    wanted = list(embedded.store.records.ids)[:6]
    found, rows = dense.vectors_of(request, wanted)
    table = VectorTable.of({i: list(r) for i, r in zip(found, rows, strict=True)})
    assert table.vectors_of(list(reversed(wanted)))[0] == list(reversed(found))
    expected = dense.score_ids(request, wanted)
    got = table.scores(request.vector or [], wanted)
    assert got.keys() == expected.keys()
    assert all(abs(got[i].score - expected[i].score) < 1e-5 for i in got)


def test_over_pinecone_both_switches_act_and_rank_as_over_the_embedded_tier(
    pinecone_dense: PineconeTier, embedded: EmbeddedIndex, emulator: PineconeEmulator
) -> None:
    local = next(t for t in embedded.tiers if t.name == "dense")
    expected = graph(local, embedded, policy(**SWITCHES)).invoke({"query": QUERY})
    out = graph(pinecone_dense, embedded, policy(**SWITCHES)).invoke({"query": QUERY})
    detail = fuse_detail(out)
    assert detail["neighbours"] == fuse_detail(expected)["neighbours"]
    assert int(detail["neighbours"].split()[0]) > 1
    scored, _, asked, _ = detail["misses"]["dense"].split()
    assert scored == asked and int(asked) > 0
    assert ids(out) == ids(expected)
    fetches = [r for r in emulator.requests if r.path == "/vectors/fetch"]
    assert len(fetches) == 1, "one fetch serves both switches"
    plain = graph(pinecone_dense, embedded, policy()).invoke({"query": QUERY})
    assert "neighbours" not in fuse_detail(plain) and "misses" not in fuse_detail(plain)


def test_a_fetch_that_fails_costs_its_deadline_and_the_turn_says_so(
    pinecone_dense: PineconeTier, embedded: EmbeddedIndex, emulator: PineconeEmulator
) -> None:
    emulator.slow(5.0, paths={"/vectors/fetch"})
    out = graph(pinecone_dense, embedded, policy(**SWITCHES)).invoke({"query": QUERY})
    detail = fuse_detail(out)
    timeout = "failed: PineconeTimeoutError: Pinecone did not answer within 0.5 s"
    assert detail["neighbours"].startswith(timeout)
    assert detail["misses"]["dense"].startswith(timeout)
    assert detail["misses"]["lexical"].endswith("scored")  # BM25 still scores its own misses
    assert out["documents"]
    assert next(s for s in out["stages"] if s["step"] == "fuse")["status"] == "done"


def test_over_pinecone_a_thread_and_a_breakpoint_equal_a_plain_invoke(
    pinecone_dense: PineconeTier, embedded: EmbeddedIndex
) -> None:
    plain = graph(pinecone_dense, embedded, policy(**SWITCHES)).invoke({"query": QUERY})
    threaded, resumed = threaded_and_resumed(
        graph(pinecone_dense, embedded, policy(**SWITCHES), checkpointer=InMemorySaver()), QUERY
    )
    assert ids(threaded) == ids(resumed) == ids(plain)
    assert threaded["context"] == resumed["context"] == plain["context"]
    assert fuse_detail(threaded) == fuse_detail(resumed) == fuse_detail(plain)
