"""PineconeTier, upsert_chunks, pinecone_tier_from_env and the tier-search node's fallback
step, through the real pinecone SDK and langchain-pinecone against the loopback data-plane
emulator."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest
from fixtures.fakes import RaisingTier, StaticTier, hit
from fixtures.pinecone_emulator import API_KEY, PineconeEmulator
from langchain_core.documents import Document
from langchain_pinecone import PineconeVectorStore
from pinecone import Pinecone
from urllib3.exceptions import MaxRetryError

from ragtiller.core.tiers import Hit, SearchRequest
from ragtiller.core.turn import TierTask
from ragtiller.errors import ConfigurationError, IngestError, TierUnavailable
from ragtiller.index import EmbeddedIndex
from ragtiller.ingest import build_index
from ragtiller.models import HashingEmbedder
from ragtiller.nodes.components import Fallback
from ragtiller.nodes.scope import sealed_turn
from ragtiller.nodes.tier_search import served
from ragtiller.pinecone import (
    PineconeTier,
    PineconeTierError,
    PineconeTimeoutError,
    pinecone_tier_from_env,
    upsert_chunks,
)

DIM = 64
EMBEDDER = HashingEmbedder(dim=DIM)
QUERIES = [
    "how do I cancel a running task",
    "event loop policy",
    "stream reader timeout",
    "queue put wait",
]


def corpus() -> list[Document]:
    texts = {
        "tasks.md": "# Tasks\n\nCancel a running task with cancel(). A cancelled task raises "
        "CancelledError.\n\n# Timeouts\n\nwait_for applies a timeout to a task.",
        "loop.md": "# Event loop\n\nThe event loop runs tasks. Set a loop policy to change "
        "the loop.\n\n# Policies\n\nA policy creates event loops.",
        "streams.md": "# Streams\n\nA stream reader reads bytes; a stream writer writes them. "
        "Reads may time out.",
    }
    docs = [Document(page_content=t, metadata={"source": s}) for s, t in texts.items()]
    docs.append(
        Document(
            page_content="# Queues\n\nput waits when the queue is full; get waits when empty.",
            metadata={"source": "queues.md", "namespace": "api"},
        )
    )
    return docs


@pytest.fixture(scope="module")
def embedded() -> EmbeddedIndex:
    return build_index(corpus(), embedder=EMBEDDER, progress=False)


@pytest.fixture
def emulator() -> Iterator[PineconeEmulator]:
    with PineconeEmulator(dimension=DIM) as server:
        yield server


@pytest.fixture
def store(emulator: PineconeEmulator) -> Iterator[PineconeVectorStore]:
    with Pinecone(api_key=API_KEY).Index(host=emulator.host) as index:
        yield PineconeVectorStore(index=index, embedding=EMBEDDER)


@pytest.fixture
def loaded(store: PineconeVectorStore, embedded: EmbeddedIndex) -> PineconeVectorStore:
    upsert_chunks(store, embedded)
    return store


def dense(embedded: EmbeddedIndex) -> Any:
    return next(t for t in embedded.tiers if t.name == "dense")


def search(tier: Any, text: str, k: int = 5, **kwargs: Any) -> list[Hit]:
    hits: list[Hit] = tier.search(
        SearchRequest(query=text, vector=EMBEDDER.embed_query(text), k=k, **kwargs)
    )
    return hits


def fields(h: Hit) -> tuple[str, str, str | None, str]:
    return h["text"], h["doc_id"], h["parent_id"], h["source"]


# --- search: the same answers as the embedded dense tier ---------------------------------


@pytest.mark.parametrize("namespaces", [["default"], ["api"], ["default", "api"], None])
@pytest.mark.parametrize("query", QUERIES)
def test_search_equals_the_embedded_dense_tier(
    loaded: PineconeVectorStore,
    embedded: EmbeddedIndex,
    query: str,
    namespaces: list[str] | None,
) -> None:
    expected = search(dense(embedded), query, k=6, namespaces=namespaces)
    got = search(PineconeTier(loaded), query, k=6, namespaces=namespaces)
    assert [h["id"] for h in got] == [h["id"] for h in expected]
    assert [h["score"] for h in got] == pytest.approx([h["score"] for h in expected], abs=1e-4)
    for mine, theirs in zip(got, expected, strict=True):
        assert fields(mine) == fields(theirs)
        # Pinecone stores no nulls (title=None is absent) and numbers as floats (3 == 3.0)
        assert mine["metadata"] == {k: v for k, v in theirs["metadata"].items() if v is not None}


def test_hit_fields_come_from_the_upserted_metadata(loaded: PineconeVectorStore) -> None:
    top = search(PineconeTier(loaded), "cancel a running task", k=1, namespaces=["default"])[0]
    assert top["text"].startswith("# Tasks\n\nCancel a running task")
    assert (top["source"], top["doc_id"]) == ("tasks.md", "tasks.md")
    assert top["parent_id"] is not None
    assert top["metadata"]["namespace"] == "default"
    assert top["metadata"]["section_path"] == ["Tasks"]
    assert "text" not in top["metadata"]


def test_the_filter_reaches_pinecone(
    loaded: PineconeVectorStore, emulator: PineconeEmulator
) -> None:
    hits = search(
        PineconeTier(loaded),
        "task",
        k=10,
        namespaces=["default"],
        filter={"source": {"$in": ["loop.md"]}},
    )
    assert hits and {h["source"] for h in hits} == {"loop.md"}
    assert emulator.requests[-1].body["filter"] == {"source": {"$in": ["loop.md"]}}


def test_several_namespaces_are_queried_and_merged_by_score(
    store: PineconeVectorStore, emulator: PineconeEmulator
) -> None:
    shared = [1.0] + [0.0] * (DIM - 1)
    near = [1.0, 1.0] + [0.0] * (DIM - 2)
    index = store.index
    index.upsert(
        vectors=[("x", shared, {"text": "x in a"}), ("y", near, {"text": "y"})], namespace="a"
    )
    index.upsert(
        vectors=[("x", near, {"text": "x in b"}), ("z", shared, {"text": "z"})], namespace="b"
    )
    hits = PineconeTier(store).search(
        SearchRequest(query="", vector=shared, k=3, namespaces=["b", "a", "b"])
    )
    assert [(h["id"], h["metadata"]["namespace"]) for h in hits] == [
        ("z", "b"),  # ties keep the order of the namespaces given
        ("x", "a"),  # x is in both: its best score (from a) is kept, once
        ("y", "a"),
    ]
    assert hits[0]["score"] == pytest.approx(1.0) and hits[2]["score"] == pytest.approx(
        0.7071, abs=1e-4
    )
    queried = sorted(r.body["namespace"] for r in emulator.requests if r.path == "/query")
    assert queried == ["a", "b"]  # a namespace named twice is queried once


def test_no_namespaces_lists_them_with_describe_index_stats(
    loaded: PineconeVectorStore, emulator: PineconeEmulator
) -> None:
    start = len(emulator.requests)
    hits = search(PineconeTier(loaded), "queue put wait", k=3)
    assert hits[0]["metadata"]["namespace"] == "api"
    assert emulator.paths()[start] == "/describe_index_stats"
    assert sorted(r.body["namespace"] for r in emulator.requests[start + 1 :]) == ["api", "default"]


async def test_asearch_equals_search(loaded: PineconeVectorStore) -> None:
    tier = PineconeTier(loaded)
    vector = EMBEDDER.embed_query("event loop policy")
    sync = tier.search(SearchRequest(query="", vector=vector, k=4, namespaces=["default", "api"]))
    got = await tier.asearch(
        SearchRequest(query="", vector=vector, k=4, namespaces=["default", "api"])
    )
    assert got == sync


async def test_asearch_does_not_block_the_event_loop(
    loaded: PineconeVectorStore, emulator: PineconeEmulator
) -> None:
    emulator.slow(0.4, paths={"/query"})
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.02)
            ticks += 1

    task = asyncio.create_task(ticker())
    hits = await PineconeTier(loaded).asearch(
        SearchRequest(query="", vector=EMBEDDER.embed_query("task"), k=2, namespaces=["default"])
    )
    task.cancel()
    assert len(hits) == 2
    assert ticks >= 5  # the loop kept running (about 20 ticks) while the query waited 0.4 s


async def test_concurrent_asearches_do_not_interfere(
    loaded: PineconeVectorStore, emulator: PineconeEmulator
) -> None:
    emulator.slow(0.3, times=2, paths={"/query"})
    tier = PineconeTier(loaded)
    vectors = [EMBEDDER.embed_query(q) for q in QUERIES]
    results = await asyncio.gather(
        *(
            tier.asearch(SearchRequest(query="", vector=v, k=2, namespaces=["default"]))
            for v in vectors
        )
    )
    assert [r[0]["id"] for r in results] == [
        tier.search(SearchRequest(query="", vector=v, k=2, namespaces=["default"]))[0]["id"]
        for v in vectors
    ]


def test_bad_arguments_are_refused(loaded: PineconeVectorStore) -> None:
    tier = PineconeTier(loaded)
    with pytest.raises(ValueError, match="needs a query vector"):
        tier.search(SearchRequest(query="q", vector=None, k=1))
    with pytest.raises(ValueError, match="k must be > 0, but got 0"):
        tier.search(SearchRequest(query="q", vector=[1.0] * DIM, k=0))
    with pytest.raises(ValueError, match="timeout_s must be > 0"):
        PineconeTier(loaded, timeout_s=0)


def test_name_is_configurable_and_the_store_may_come_later(loaded: PineconeVectorStore) -> None:
    calls: list[int] = []

    def make() -> PineconeVectorStore:
        calls.append(1)
        return loaded

    tier = PineconeTier(make, name="pinecone_dense")
    assert (tier.name, tier.needs_vector, calls) == ("pinecone_dense", True, [])
    assert search(tier, "task", k=1, namespaces=["default"])
    assert search(tier, "loop", k=1, namespaces=["default"])
    assert calls == [1]


# --- failures: the tier raises, the graph turns that into an error event -----------------


def test_429_raises_at_once_with_the_status(
    loaded: PineconeVectorStore, emulator: PineconeEmulator
) -> None:
    emulator.fail(429, paths={"/query"})
    with pytest.raises(
        PineconeTierError, match=r"HTTP 429 Too Many Requests \(namespace 'default'\)"
    ) as info:
        search(PineconeTier(loaded), "task", namespaces=["default"])
    assert (info.value.status_code, info.value.namespace) == (429, "default")
    assert emulator.paths().count("/query") == 1  # the SDK does not retry 429


def test_a_transient_503_is_retried_by_the_sdk(
    loaded: PineconeVectorStore, emulator: PineconeEmulator
) -> None:
    emulator.fail(503, times=1, paths={"/query"})
    assert search(PineconeTier(loaded), "task", namespaces=["default"])
    assert [r.status for r in emulator.requests if r.path == "/query"] == [503, 200]


@pytest.mark.parametrize("use_async", [False, True])
def test_a_lasting_503_raises_within_the_deadline(
    loaded: PineconeVectorStore, emulator: PineconeEmulator, use_async: bool
) -> None:
    emulator.fail(503, paths={"/query"})
    tier = PineconeTier(loaded, timeout_s=0.6)
    vector = EMBEDDER.embed_query("task")
    started = time.monotonic()
    with pytest.raises(PineconeTimeoutError, match=r"did not answer within 0\.6 s") as info:
        if use_async:
            asyncio.run(
                tier.asearch(SearchRequest(query="", vector=vector, k=3, namespaces=["default"]))
            )
        else:
            tier.search(SearchRequest(query="", vector=vector, k=3, namespaces=["default"]))
    assert time.monotonic() - started < 1.5
    assert isinstance(info.value, TimeoutError) and isinstance(info.value, PineconeTierError)
    assert 503 in {r.status for r in emulator.requests if r.path == "/query"}


@pytest.mark.slow
def test_a_lasting_503_surfaces_once_the_sdk_gives_up(
    loaded: PineconeVectorStore, emulator: PineconeEmulator
) -> None:
    emulator.fail(503, paths={"/query"})
    with pytest.raises(PineconeTierError, match="Pinecone request failed") as info:
        search(PineconeTier(loaded, timeout_s=30), "task", namespaces=["default"])
    assert isinstance(info.value.__cause__, MaxRetryError)
    assert "too many 503 error responses" in str(info.value)
    assert [r.status for r in emulator.requests if r.path == "/query"] == [503] * 6


@pytest.mark.parametrize("use_async", [False, True])
def test_a_slow_answer_times_out(
    loaded: PineconeVectorStore, emulator: PineconeEmulator, use_async: bool
) -> None:
    emulator.slow(5.0, paths={"/query"})
    tier = PineconeTier(loaded, timeout_s=0.3)
    vector = EMBEDDER.embed_query("task")
    with pytest.raises(PineconeTimeoutError) as info:
        if use_async:
            asyncio.run(
                tier.asearch(
                    SearchRequest(query="", vector=vector, k=3, namespaces=["default", "api"])
                )
            )
        else:
            tier.search(SearchRequest(query="", vector=vector, k=3, namespaces=["default", "api"]))
    assert info.value.namespace == "default"


# --- upsert_chunks ------------------------------------------------------------------------


def test_upsert_uses_chunk_ids_and_carries_the_hit_fields(
    store: PineconeVectorStore, embedded: EmbeddedIndex, emulator: PineconeEmulator
) -> None:
    counts = upsert_chunks(store, embedded)
    records = embedded.store.records
    assert counts == {"default": len(records) - 1, "api": 1}
    fetched = store.index.fetch(ids=list(records.ids), namespace="default").vectors
    row = next(r for r, md in enumerate(records.metadatas) if md["namespace"] == "default")
    vector = fetched[records.ids[row]]
    assert vector.values == pytest.approx(embedded.store.vectors[row].tolist(), abs=1e-6)
    metadata = vector.metadata
    assert metadata["text"] == records.texts[row]
    for key in ("source", "doc_id", "parent_id", "namespace", "section_path"):
        assert metadata[key] == records.metadatas[row][key]
    assert "title" not in metadata  # None values are left out: Pinecone rejects nulls


def test_re_upsert_replaces_instead_of_duplicating(
    store: PineconeVectorStore, embedded: EmbeddedIndex, emulator: PineconeEmulator
) -> None:
    upsert_chunks(store, embedded)
    upsert_chunks(store, embedded.store)
    total = len(embedded.store.records)
    assert store.index.describe_index_stats().total_vector_count == total


def test_upsert_is_batched(
    store: PineconeVectorStore, embedded: EmbeddedIndex, emulator: PineconeEmulator
) -> None:
    upsert_chunks(store, embedded, batch_size=2)
    sizes = [len(r.body["vectors"]) for r in emulator.requests if r.path == "/vectors/upsert"]
    default = len(embedded.store.records) - 1
    assert sizes == [2] * (default // 2) + [default % 2] * (default % 2) + [1]
    with pytest.raises(ValueError, match="batch_size must be between 1 and 1000, but got 1001"):
        upsert_chunks(store, embedded, batch_size=1001)


def test_upsert_retries_a_rate_limited_batch(
    store: PineconeVectorStore, embedded: EmbeddedIndex, emulator: PineconeEmulator
) -> None:
    emulator.fail(429, times=2, paths={"/vectors/upsert"})
    delays: list[float] = []
    upsert_chunks(store, embedded, sleep=delays.append)
    assert len(delays) == 2
    assert store.index.describe_index_stats().total_vector_count == len(embedded.store.records)


def test_upsert_failure_names_the_batch(
    store: PineconeVectorStore, embedded: EmbeddedIndex, emulator: PineconeEmulator
) -> None:
    emulator.fail(429, paths={"/vectors/upsert"})
    with pytest.raises(
        IngestError, match=r"namespace 'default' failed at chunks 0-3: .*running again is safe"
    ):
        upsert_chunks(store, embedded, batch_size=4, sleep=lambda _: None)


def test_upsert_documents_with_an_embedder_or_vectors(
    store: PineconeVectorStore, emulator: PineconeEmulator
) -> None:
    docs = [
        Document(id="n1", page_content="alpha beta", metadata={"source": "n.md", "rank": 1}),
        Document(page_content="gamma delta", metadata={"source": "m.md"}),
    ]
    assert upsert_chunks(store, docs, embedder=EMBEDDER, namespace="notes") == {"notes": 2}
    again = upsert_chunks(
        store, docs, EMBEDDER.embed_documents([d.page_content for d in docs]), namespace="notes"
    )
    assert again == {"notes": 2}
    assert store.index.describe_index_stats().namespaces["notes"].vector_count == 2  # stable ids
    last_upsert = [r for r in emulator.requests if r.path == "/vectors/upsert"][-1]
    ids = [v["id"] for v in last_upsert.body["vectors"]]
    assert ids[0] == "n1" and len(ids[1]) == 32  # content hash for a Document without id
    hits = search(PineconeTier(store), "alpha beta", k=1, namespaces=["notes"])
    assert (hits[0]["id"], hits[0]["doc_id"], hits[0]["metadata"]["rank"]) == ("n1", "n1", 1.0)


def test_upsert_refuses_metadata_pinecone_cannot_store(store: PineconeVectorStore) -> None:
    nested = Document(id="x", page_content="t", metadata={"spans": {"a": 1}})
    with pytest.raises(IngestError, match="chunk 'x': metadata 'spans' is a dict"):
        upsert_chunks(store, [nested], embedder=EMBEDDER)
    huge = Document(id="y", page_content="word " * 10_000)
    with pytest.raises(IngestError, match=r"chunk 'y': its metadata .* over Pinecone's 40960"):
        upsert_chunks(store, [huge], embedder=EMBEDDER)
    with pytest.raises(ValueError, match=r"vectors of shape \(1, 3\) for 2 documents"):
        upsert_chunks(store, [nested, huge], [[1.0, 2.0, 3.0]])


def test_upsert_without_credentials_says_why(embedded: EmbeddedIndex) -> None:
    tier = pinecone_tier_from_env(EMBEDDER, env={})
    with pytest.raises(
        ConfigurationError, match=r"cannot upsert to Pinecone: .*set PINECONE_API_KEY"
    ):
        upsert_chunks(tier, embedded)


def test_upsert_through_a_tier(store: PineconeVectorStore, embedded: EmbeddedIndex) -> None:
    tier = PineconeTier(lambda: store)
    assert sum(upsert_chunks(tier, embedded).values()) == len(embedded.store.records)


# --- configuration from the environment ------------------------------------------------------


async def test_no_api_key_gives_a_tier_skipped_for_no_credentials() -> None:
    tier = pinecone_tier_from_env(EMBEDDER, env={"PINECONE_HOST": "http://127.0.0.1:9"})
    assert isinstance(tier, PineconeTier) and (tier.name, tier.needs_vector) == ("dense", True)
    with pytest.raises(TierUnavailable, match="set PINECONE_API_KEY") as info:
        tier.search(SearchRequest(query="q", vector=[1.0] * DIM, k=1))
    assert info.value.reason == "no-credentials"
    with pytest.raises(TierUnavailable):
        await tier.asearch(SearchRequest(query="q", vector=[1.0] * DIM, k=1))


def test_api_key_without_host_or_index_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="neither PINECONE_HOST nor PINECONE_INDEX"):
        pinecone_tier_from_env(EMBEDDER, env={"PINECONE_API_KEY": "k"})


def test_env_with_host_searches_the_index(
    loaded: PineconeVectorStore, emulator: PineconeEmulator
) -> None:
    env = {"PINECONE_API_KEY": API_KEY, "PINECONE_HOST": emulator.host, "PINECONE_INDEX": "ignored"}
    start = len(emulator.requests)
    tier = pinecone_tier_from_env(EMBEDDER, env=env, name="remote", timeout_s=2.0)
    assert isinstance(tier, PineconeTier) and (tier.name, tier.timeout_s) == ("remote", 2.0)
    assert len(emulator.requests) == start  # building the tier does no I/O
    assert search(tier, "task", k=2, namespaces=["default"])
    assert emulator.requests[-1].headers["api-key"] == API_KEY


def test_env_with_index_name_only_defers_the_host_lookup(emulator: PineconeEmulator) -> None:
    tier = pinecone_tier_from_env(EMBEDDER, env={"PINECONE_API_KEY": "k", "PINECONE_INDEX": "docs"})
    assert isinstance(tier, PineconeTier)
    assert emulator.requests == []  # the control-plane lookup waits for the first search


# --- the tier-search node's fallback step ------------------------------------------------


def task(text: str, k: int = 3) -> TierTask:
    return TierTask(
        tier="dense",
        query=text,
        vector=EMBEDDER.embed_query(text),
        k=k,
        **sealed_turn(None, ["default"], None),
        deadline_s=5.0,
        turn_bound=False,
    )


async def test_fallback_serves_when_the_primary_has_no_credentials(
    embedded: EmbeddedIndex,
) -> None:
    primary = pinecone_tier_from_env(EMBEDDER, env={})
    backup = Fallback(dense(embedded), primary="pinecone", label="embedded")
    hits, by = await served(primary, backup, task("cancel a running task"))
    expected = search(dense(embedded), "cancel a running task", k=3, namespaces=["default"])
    assert [h["id"] for h in hits] == [h["id"] for h in expected]
    assert by == {"served_by": "embedded", "fallback_reason": "no-credentials"}  # labelled by it
    assert not any("served_by" in h["metadata"] for h in hits)  # the node says it, not the hits


async def test_the_primary_serving_is_said_without_a_label(
    loaded: PineconeVectorStore, embedded: EmbeddedIndex
) -> None:
    backup = Fallback(dense(embedded), primary="pinecone", label="embedded")
    hits, by = await served(PineconeTier(loaded), backup, task("task", k=2))
    assert len(hits) == 2 and by == {"served_by": "pinecone"}  # no fallback_reason: no label


async def test_an_outage_raises_unless_listed_in_the_fallbacks_errors() -> None:
    outage = RaisingTier("dense", [])
    backup = StaticTier("dense", [hit("dense", "c1", 0.5)])
    with pytest.raises(ConnectionError, match="dense is down"):
        await served(outage, Fallback(backup), task("q", k=1))
    hits, by = await served(outage, Fallback(backup, on=(ConnectionError,)), task("q", k=1))
    assert [h["id"] for h in hits] == ["c1"]
    assert by == {"served_by": "fallback", "fallback_reason": "ConnectionError"}
