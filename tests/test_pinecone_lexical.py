"""The Pinecone lexical tier, its statistics and ``lexical_backend``, through the real SDK.

The emulator serves a sparse index; degradation is checked through the graph, as for dense.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from concurrent import futures
from typing import Any

import pytest
from fixtures.pinecone_emulator import API_KEY, PineconeEmulator
from langchain_core.documents import Document
from pinecone import Pinecone

from ragtiller import ConfigurationError, build_graph, load_policy
from ragtiller.core.bulkhead import Overloaded
from ragtiller.core.tiers import SearchRequest
from ragtiller.errors import IngestError, TierUnavailable
from ragtiller.graph import tiers_for_policy
from ragtiller.index import EmbeddedIndex, LexicalConfig
from ragtiller.ingest import build_index
from ragtiller.models import HashingEmbedder
from ragtiller.pinecone import (
    BM25Stats,
    PineconeIndexSettings,
    PineconeLexicalTier,
    PineconeTierError,
    PineconeTimeoutError,
    pinecone_lexical_tier_from_env,
    upsert_lexical,
)
from ragtiller.pinecone.sparse_bm25 import STATS_NAMESPACE, read_stats, write_stats
from ragtiller.policies import RetrievalPolicy

QUERY = "which timeout does wait_for apply to a task"


def docs() -> list[Document]:
    return [
        Document(
            page_content="# Timeouts\n\nwait_for applies a timeout to a task.",
            metadata={"source": "t.md"},
        ),
        Document(
            page_content="# Loop\n\nThe event loop runs callbacks.", metadata={"source": "l.md"}
        ),
        Document(
            page_content="# Queues\n\nput waits when the queue is full.",
            metadata={"source": "q.md", "namespace": "api"},
        ),
    ]


@pytest.fixture(scope="module")
def index() -> EmbeddedIndex:
    return build_index(docs(), embedder=HashingEmbedder(dim=16), progress=False)


@pytest.fixture
def emulator() -> Iterator[PineconeEmulator]:
    with PineconeEmulator(dimension=None) as server:
        yield server


@pytest.fixture
def remote(emulator: PineconeEmulator) -> Iterator[Any]:
    with Pinecone(api_key=API_KEY).Index(host=emulator.host) as handle:
        yield handle


@pytest.fixture
def loaded(remote: Any, index: EmbeddedIndex) -> Any:
    upsert_lexical(remote, index)
    return remote


def search(tier: Any, text: str = QUERY, k: int = 5, **kwargs: Any) -> list[Any]:
    hits: list[Any] = tier.search(SearchRequest(query=text, vector=None, k=k, **kwargs))
    return hits


# --- statistics ---------------------------------------------------------------------------


def test_statistics_round_trip_across_many_parts(remote: Any) -> None:
    texts = [f"term{i} shared word{i % 7}" for i in range(6000)]
    stats = BM25Stats.build(texts, LexicalConfig(stemmer=None))
    version = write_stats(remote, stats)
    found = read_stats(remote)
    assert found is not None and found == (version, stats)
    header = remote.fetch(ids=["bm25-stats"], namespace=STATS_NAMESPACE).vectors["bm25-stats"]
    assert header.metadata["parts"] > 1


def test_a_new_write_replaces_the_old_parts(remote: Any, emulator: PineconeEmulator) -> None:
    config = LexicalConfig()
    write_stats(remote, BM25Stats.build(["a cat sat"], config))
    second = BM25Stats.build(["a dog sat", "a bird sang"], config)
    version = write_stats(remote, second)
    assert read_stats(remote) == (version, second)
    assert emulator.vector_count(STATS_NAMESPACE) == 2  # the header and one part: old part gone


def test_upsert_writes_vectors_per_namespace_and_the_statistics(
    remote: Any, index: EmbeddedIndex, emulator: PineconeEmulator
) -> None:
    counts = upsert_lexical(remote, index)
    assert counts == {"default": 2, "api": 1}
    found = read_stats(remote)
    assert found is not None
    stats = found[1]
    assert (stats.documents, stats.lexical) == (len(index.store.records), index.manifest.lexical)
    record = remote.fetch(ids=[index.store.records.ids[0]], namespace="default").vectors
    (vector,) = record.values()
    assert vector.sparse_values.indices and all(v > 0 for v in vector.sparse_values.values)


def test_only_ids_sends_those_vectors_and_counts_the_whole_corpus(
    remote: Any, index: EmbeddedIndex, emulator: PineconeEmulator
) -> None:
    first = index.store.records.ids[0]
    assert upsert_lexical(remote, index, only_ids={first}) == {"default": 1}
    assert emulator.vector_count("default") == 1
    found = read_stats(remote)
    assert found is not None and found[1].documents == len(index.store.records)


def test_no_statistics_is_a_known_absence(remote: Any) -> None:
    with pytest.raises(TierUnavailable, match="run upsert_lexical") as info:
        search(PineconeLexicalTier(remote), namespaces=["default"])
    assert info.value.reason == "no-statistics"


def test_statistics_are_refetched_once_their_ttl_passed(remote: Any, index: EmbeddedIndex) -> None:
    upsert_lexical(remote, docs()[:2])
    now = [0.0]
    tier = PineconeLexicalTier(remote, stats_ttl_s=30, clock=lambda: now[0])
    assert tier.encoder().stats.documents == 2
    upsert_lexical(remote, index)  # a re-ingest, seen by this replica ...
    now[0] = 10.0
    assert tier.encoder().stats.documents == 2  # ... not before the ttl
    now[0] = 31.0
    assert tier.encoder().stats.documents == len(index.store.records)


def test_methods_without_a_sparse_form_are_refused(remote: Any) -> None:
    with pytest.raises(ConfigurationError, match=r"bm25l.*lucene, robertson, atire"):
        upsert_lexical(remote, docs(), config=LexicalConfig(method="bm25l"))


def test_upsert_without_credentials_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="PINECONE_API_KEY"):
        upsert_lexical(pinecone_lexical_tier_from_env(env={}), docs())


def test_a_failed_statistics_write_is_an_ingest_error(
    remote: Any, emulator: PineconeEmulator
) -> None:
    emulator.fail(400, paths={"/vectors/fetch"})
    with pytest.raises(IngestError, match="statistics were not"):
        upsert_lexical(remote, docs())


# --- the tier -----------------------------------------------------------------------------


def test_every_namespace_leaves_the_statistics_out(loaded: Any, emulator: PineconeEmulator) -> None:
    hits = search(PineconeLexicalTier(loaded), "put queue timeout", k=10)
    assert {h["metadata"]["namespace"] for h in hits} == {"default", "api"}
    queried = {r.body["namespace"] for r in emulator.requests if r.path == "/query"}
    assert queried == {"default", "api"}


def test_a_query_without_known_terms_sends_nothing(loaded: Any, emulator: PineconeEmulator) -> None:
    assert search(PineconeLexicalTier(loaded), "zzzz qqqq", namespaces=["default"]) == []
    assert "/query" not in emulator.paths()


def test_the_tier_connects_on_first_search_only() -> None:
    def connect() -> Any:
        raise AssertionError("no I/O when the tier is built")

    tier = PineconeLexicalTier(connect)
    assert (tier.name, tier.needs_vector) == ("lexical", False)
    with pytest.raises(ConfigurationError, match="stats_ttl_s must be > 0"):
        PineconeLexicalTier(connect, stats_ttl_s=0)


def test_429_raises_with_the_status(loaded: Any, emulator: PineconeEmulator) -> None:
    emulator.fail(429, paths={"/query"})
    with pytest.raises(PineconeTierError, match="HTTP 429") as info:
        search(PineconeLexicalTier(loaded), namespaces=["default"])
    assert info.value.status_code == 429


@pytest.mark.parametrize("use_async", [False, True])
def test_a_slow_answer_times_out(loaded: Any, emulator: PineconeEmulator, use_async: bool) -> None:
    emulator.slow(5.0, paths={"/query"})
    tier = PineconeLexicalTier(loaded, timeout_s=0.3)
    with pytest.raises(PineconeTimeoutError):
        if use_async:
            asyncio.run(
                tier.asearch(SearchRequest(query=QUERY, vector=None, k=3, namespaces=["default"]))
            )
        else:
            search(tier, namespaces=["default"])


def test_the_bulkhead_refuses_calls_beyond_its_limit_until_they_end(
    loaded: Any, emulator: PineconeEmulator
) -> None:
    tier = PineconeLexicalTier(loaded, timeout_s=0.2, max_in_flight=1)
    tier.encoder()  # statistics fetched: searches now make one call per namespace
    emulator.slow(1.0, times=1, paths={"/query"})
    with pytest.raises(PineconeTimeoutError):
        search(tier, namespaces=["default"])  # abandoned at 0.2 s, still holding the slot
    with pytest.raises(PineconeTierError, match="1 Pinecone calls already in flight"):
        search(tier, namespaces=["default"])
    deadline = time.monotonic() + 5
    while tier.call_limit.count and time.monotonic() < deadline:
        time.sleep(0.05)
    assert search(tier, namespaces=["default"])  # the slow call ended: the slot is free
    with pytest.raises(ConfigurationError, match="max_in_flight must be >= 1"):
        PineconeLexicalTier(loaded, max_in_flight=0)


@pytest.mark.parametrize("use_async", [False, True])
def test_a_call_beyond_the_limit_waits_for_a_healthy_one_instead_of_failing(
    loaded: Any, emulator: PineconeEmulator, use_async: bool
) -> None:
    tier = PineconeLexicalTier(loaded, timeout_s=3.0, max_in_flight=1)
    tier.encoder()
    emulator.slow(0.4, times=1, paths={"/query"})  # healthy: well within the deadline
    request = SearchRequest(query=QUERY, vector=None, k=3, namespaces=["default"])
    with futures.ThreadPoolExecutor(2) as pool:
        first = pool.submit(tier.search, request)
        time.sleep(0.1)  # the first call holds the only slot
        second = asyncio.run(tier.asearch(request)) if use_async else tier.search(request)
        assert first.result() and second  # both answered: the second waited, not shed


def test_a_call_that_waits_past_its_deadline_is_overloaded_not_failed(
    loaded: Any, emulator: PineconeEmulator
) -> None:
    tier = PineconeLexicalTier(loaded, timeout_s=0.5, max_in_flight=1)
    tier.encoder()
    slow_but_healthy = PineconeLexicalTier(loaded, timeout_s=3.0, max_in_flight=1)
    slow_but_healthy.call_limit = tier.call_limit  # one index, one limit
    emulator.slow(1.5, times=1, paths={"/query"})
    request = SearchRequest(query=QUERY, vector=None, k=3, namespaces=["default"])
    with futures.ThreadPoolExecutor(1) as pool:
        held = pool.submit(slow_but_healthy.search, request)
        time.sleep(0.1)
        with pytest.raises(Overloaded, match="busy, not failing"):
            tier.search(request)
        assert held.result()


def test_the_env_settings_hold_the_key_as_a_secret() -> None:
    env = {"PINECONE_API_KEY": "sk-very-secret", "PINECONE_SPARSE_HOST": "http://h"}
    settings = PineconeIndexSettings.from_env(
        env, host_env="PINECONE_SPARSE_HOST", index_env="PINECONE_SPARSE_INDEX"
    )
    assert settings is not None and "sk-very-secret" not in repr(settings)
    assert settings.api_key.get_secret_value() == "sk-very-secret"
    with pytest.raises(ConfigurationError, match="PINECONE_SPARSE_HOST"):
        pinecone_lexical_tier_from_env({"PINECONE_API_KEY": "k"})


# --- lexical_backend: how the graph degrades ----------------------------------------------


def policy(**backend: Any) -> RetrievalPolicy:
    base = load_policy()
    return base.model_copy(
        update={"lexical_backend": base.lexical_backend.model_copy(update=backend)}
    )


def lexical_outcome(
    policy: RetrievalPolicy, index: EmbeddedIndex, env: dict[str, str]
) -> dict[str, Any]:
    """The graph's tier-search event for ``lexical``: its status, what served it and why."""
    graph = build_graph(policy, index=index, tiers=tiers_for_policy(policy, index, env=env))
    events = [
        e for e in graph.stream({"query": QUERY}, stream_mode="custom") if e["status"] != "active"
    ]
    (event,) = [
        e for e in events if e["step"] == "tier_search" and e["detail"].get("tier") == "lexical"
    ]
    return event


def embedded_hits(index: EmbeddedIndex) -> int:
    """How many hits the embedded lexical tier gives the query (what its fallback serves)."""
    (tier,) = [t for t in index.tiers if t.name == "lexical"]
    return len(search(tier, namespaces=["default"]))


def env_for(emulator: PineconeEmulator) -> dict[str, str]:
    return {"PINECONE_API_KEY": API_KEY, "PINECONE_SPARSE_HOST": emulator.host}


def test_the_embedded_backend_is_the_default(index: EmbeddedIndex) -> None:
    assert load_policy().lexical_backend.provider == "embedded"
    assert tiers_for_policy(load_policy(), index, env={}) == index.tiers


def test_configured_pinecone_serves_the_lexical_tier(
    index: EmbeddedIndex, loaded: Any, emulator: PineconeEmulator
) -> None:
    event = lexical_outcome(policy(provider="pinecone"), index, env_for(emulator))
    assert (event["status"], event["detail"]["served_by"]) == ("done", "pinecone")
    assert event["detail"]["hits"] > 0 and "labels" not in event


def test_no_credentials_falls_back_to_bm25s_with_a_label(index: EmbeddedIndex) -> None:
    event = lexical_outcome(policy(provider="pinecone"), index, env={})
    assert event["status"] == "done" and event["detail"]["hits"] == embedded_hits(index) > 0
    assert (event["detail"]["served_by"], event["detail"]["fallback_reason"]) == (
        "embedded",
        "no-credentials",
    )
    assert event["labels"] == ["tier_search (lexical) served by fallback embedded: no-credentials"]


def test_no_credentials_without_fallback_is_skipped(index: EmbeddedIndex) -> None:
    event = lexical_outcome(policy(provider="pinecone", fallback="none"), index, env={})
    assert (event["status"], event["detail"]["reason"]) == ("skipped", "no-credentials")


def test_an_outage_falls_back_when_the_policy_says_so(
    index: EmbeddedIndex, loaded: Any, emulator: PineconeEmulator
) -> None:
    emulator.fail(429, paths={"/query"})
    chosen = policy(provider="pinecone", fallback_on_outage=True)
    event = lexical_outcome(chosen, index, env_for(emulator))
    assert event["status"] == "done" and event["detail"]["hits"] == embedded_hits(index) > 0
    assert (event["detail"]["served_by"], event["detail"]["fallback_reason"]) == (
        "embedded",
        "PineconeTierError",
    )


def test_an_outage_without_the_switch_is_an_error_and_no_hits(
    index: EmbeddedIndex, loaded: Any, emulator: PineconeEmulator
) -> None:
    emulator.fail(429, paths={"/query"})
    event = lexical_outcome(policy(provider="pinecone"), index, env_for(emulator))
    assert (event["status"], event["detail"]["hits"]) == ("error", 0)
    assert "HTTP 429" in event["error"]
