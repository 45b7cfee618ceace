"""The graph end to end with Pinecone (the emulator) as its dense tier, healthy and failing."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fixtures.pinecone_copy import pinecone_copy
from fixtures.pinecone_emulator import PineconeEmulator
from langchain_core.documents import Document

from ragtiller import build_graph
from ragtiller.core.tiers import Tier
from ragtiller.index import EmbeddedIndex
from ragtiller.ingest import build_index
from ragtiller.models import HashingEmbedder
from ragtiller.pinecone import PineconeTier, pinecone_tier_from_env

DIM = 64
EMBEDDER = HashingEmbedder(dim=DIM)
QUERY = "which timeout does wait_for apply to a task"


@pytest.fixture(scope="module")
def embedded() -> EmbeddedIndex:
    docs = [
        Document(
            page_content="# Tasks\n\nCancel a task with cancel().\n\n# Timeouts\n\n"
            "wait_for applies a timeout to a task and cancels it.",
            metadata={"source": "tasks.md"},
        ),
        Document(
            page_content="# Event loop\n\nThe event loop runs tasks and callbacks.",
            metadata={"source": "loop.md"},
        ),
    ]
    return build_index(docs, embedder=EMBEDDER, progress=False)


@pytest.fixture
def emulator() -> Iterator[PineconeEmulator]:
    with PineconeEmulator(dimension=DIM) as server:
        yield server


@pytest.fixture
def pinecone_dense(emulator: PineconeEmulator, embedded: EmbeddedIndex) -> Iterator[PineconeTier]:
    with pinecone_copy(emulator, embedded, EMBEDDER, timeout_s=0.5) as tier:
        yield tier


def run(dense: Tier, embedded: EmbeddedIndex) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """Run one turn with ``dense`` beside the embedded parent-child and lexical tiers."""
    others = [t for t in embedded.tiers if t.name != "dense"]
    graph = build_graph(require_tenant=False, tiers=[dense, *others], embedder=EMBEDDER)
    out: dict[str, Any] = {}
    tier_events: dict[str, dict[str, Any]] = {}
    for mode, chunk in graph.stream({"query": QUERY}, stream_mode=["custom", "values"]):
        if mode == "values":
            out = chunk
        elif chunk["step"] == "tier_search" and chunk["status"] != "active":
            tier_events[chunk["detail"]["tier"]] = chunk
    return out, tier_events


def test_pinecone_serves_the_dense_tier(
    pinecone_dense: PineconeTier, embedded: EmbeddedIndex
) -> None:
    out, events = run(pinecone_dense, embedded)
    assert events["dense"]["status"] == "done" and events["dense"]["detail"]["hits"] > 0
    dense_ids = [s.id for s in out["manifest"].tiers["dense"]]
    assert set(dense_ids) <= set(embedded.store.records.ids)


def test_a_503_is_a_tier_error_and_the_turn_still_answers(
    pinecone_dense: PineconeTier, embedded: EmbeddedIndex, emulator: PineconeEmulator
) -> None:
    emulator.fail(503, paths={"/query"})
    out, events = run(pinecone_dense, embedded)
    dense = events["dense"]
    assert dense["status"] == "error"
    assert dense["error"].startswith("PineconeTimeoutError: Pinecone did not answer within 0.5 s")
    assert events["lexical"]["status"] == "done"
    # parent-child is weighed 0 by the default: never searched, so it cannot answer instead
    assert events["parent_child"]["detail"]["reason"] == "weight-0"
    assert out["documents"], "the lexical tier still answers"
    assert 503 in {r.status for r in emulator.requests if r.path == "/query"}


def test_a_429_is_a_tier_error_naming_the_status(
    pinecone_dense: PineconeTier, embedded: EmbeddedIndex, emulator: PineconeEmulator
) -> None:
    emulator.fail(429, paths={"/query"})
    out, events = run(pinecone_dense, embedded)
    assert events["dense"]["status"] == "error"
    assert "HTTP 429" in events["dense"]["error"]
    assert out["documents"]


def test_missing_credentials_skip_the_tier(embedded: EmbeddedIndex) -> None:
    out, events = run(pinecone_tier_from_env(EMBEDDER, env={}), embedded)
    dense = events["dense"]
    assert (dense["status"], dense["detail"]["reason"]) == ("skipped", "no-credentials")
    assert out["documents"]
