"""The cache key: normalized, hashed, and defined for every Python str."""

from __future__ import annotations

import asyncio
import hashlib
import os

import pytest

from ragtiller.stores import MemoryCache, cache_key


def test_cache_key_is_the_sha256_of_the_normalized_parts() -> None:
    expected = hashlib.sha256(b"step-back\x1fhow do i start?").hexdigest()
    assert cache_key("step-back", "how do i start?") == expected
    assert cache_key("  STEP-back ", "How\tdo  I\n start?  ") == expected


def test_cache_key_casefolds_beyond_lowercase() -> None:
    assert cache_key("Straße") == cache_key("STRASSE")


def test_cache_key_keeps_part_boundaries() -> None:
    assert cache_key("a b", "c") != cache_key("a", "b c")
    assert cache_key("ab") != cache_key("a", "b")
    assert cache_key("a\x1fb") != cache_key("a", "b")  # the separator is whitespace in a part
    assert len(cache_key("x")) == 64


def test_an_undecodable_argv_byte_has_a_key() -> None:
    question = os.fsdecode(b"how do I compute lift \xff?")  # what argv gives for $'\xff'
    assert question == "how do I compute lift \udcff?"
    expected = hashlib.sha256(b"how do i compute lift \xed\xb3\xbf?").hexdigest()
    assert cache_key(question) == expected
    assert cache_key(question) != cache_key("how do I compute lift ?")


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("\udcc3\udca9", "é"),  # surrogateescape would give both b"\xc3\xa9"
        ("\ud83d\ude00", "😀"),  # a surrogate pair is not the character it would pair into
        ("\udcff", "\ufffd"),  # nor the replacement character errors="replace" would give
        ("\udcff", "\udcfe"),
        ("\ud800", "\udc00"),
    ],
)
def test_different_strings_never_share_a_key(a: str, b: str) -> None:
    assert cache_key("step-back", a) != cache_key("step-back", b)


def test_valid_text_keeps_the_key_it_had_before_surrogates_were_allowed() -> None:
    text = "Ünïcødé — 中文 😀"
    expected = hashlib.sha256(text.casefold().encode("utf-8")).hexdigest()
    assert cache_key(text) == expected


def test_a_cache_accepts_a_key_built_from_lone_surrogates() -> None:
    cache = MemoryCache()
    key = cache_key("step-back", "lift \udcff")

    async def general() -> str:
        return "general"

    async def main() -> None:
        assert await cache.aget_or_compute(key, general, ttl_s=60) == ("general", False)
        assert await cache.aget(key) == "general"

    asyncio.run(main())


@pytest.mark.redis
def test_a_broad_turn_with_an_undecodable_byte_is_cached_in_redis(
    redis_url: str, redis_prefix: str
) -> None:
    from fixtures.fakes import ScriptedChatModel, StaticTier, hit
    from langchain_core.embeddings import DeterministicFakeEmbedding

    from ragtiller import build_graph
    from ragtiller.stores import MemoryQuotaLedger, RedisCache

    cache = RedisCache(url=redis_url, prefix=redis_prefix)
    model = ScriptedChatModel(reply="What is lift in association rule mining?")
    graph = build_graph(
        require_tenant=False,
        tiers=[StaticTier("dense", [hit("dense", "c1", 0.9)])],
        embedder=DeterministicFakeEmbedding(size=8),
        chat_model=model,
        quota=MemoryQuotaLedger({"chat_gen": 5, "rerank_calls": 5}),
        cache=cache,
    )
    question = os.fsdecode(b"how do I compute lift \xff for my association rules?")
    try:
        first = graph.invoke({"query": question})["manifest"].stage("step_back")
        second = graph.invoke({"query": question})["manifest"].stage("step_back")
    finally:
        cache.close()
    assert (first.status, first.reason) == ("done", "generalized")
    assert (second.status, second.reason) == ("done", "from-cache")
    assert model.calls == 1
