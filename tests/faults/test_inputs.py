"""Bad input: any str is handled end to end; a non-str input is one clear, typed error."""

from __future__ import annotations

from typing import Any

import pytest
from fixtures.fakes import ScriptedChatModel, StaticTier, hit
from langgraph.checkpoint.memory import InMemorySaver

from ragtiller import build_graph
from ragtiller.errors import InputError
from ragtiller.models import HashingEmbedder
from ragtiller.stores import MemoryQuotaLedger, RedisCache


def graph(**parts: Any) -> Any:
    tiers = [
        StaticTier("dense", [hit("dense", "a", 0.5)]),
        StaticTier("lexical", [hit("lexical", "b", 1.0)], needs_vector=False),
    ]
    return build_graph(require_tenant=False, embedder=HashingEmbedder(), tiers=tiers, **parts)


@pytest.mark.redis
def test_undecodable_bytes_from_argv_pass_every_store_and_checkpoint(redis_url: str) -> None:
    query = b"how do I compute lift \xff?".decode("utf-8", "surrogateescape")
    cache = RedisCache(url=redis_url)
    g = graph(
        chat_model=ScriptedChatModel(),
        quota=MemoryQuotaLedger({"chat_gen": 5}),
        cache=cache,
        checkpointer=InMemorySaver(),
    )
    try:
        out = g.invoke({"query": query}, {"configurable": {"thread_id": "t"}})
        again = g.invoke({"query": query}, {"configurable": {"thread_id": "t"}})
    finally:
        cache.close()
    manifest = out["manifest"]
    assert manifest.step_back.status == "done"
    assert "\ufffd" in manifest.rerank_query
    assert "query held undecodable characters, replaced by U+FFFD" in manifest.degraded
    assert manifest.model_dump_json()
    assert again["manifest"].step_back.from_cache


@pytest.mark.parametrize(
    ("inputs", "key"),
    [
        ({"query": 42}, "query"),
        ({"query": b"bytes"}, "query"),
        ({"query": "what is asyncio?", "namespace": 7}, "namespace"),
        ({"query": "what is asyncio?", "tenant": 7}, "tenant"),
    ],
)
def test_non_str_input_is_a_typed_error_naming_the_key(inputs: dict[str, Any], key: str) -> None:
    with pytest.raises(InputError, match=repr(key)):
        graph().invoke(inputs)
