"""The real bundled model: all-MiniLM-L6-v2 on onnxruntime, offline (slow: exports the model once)."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import numpy as np
import pytest
from langchain_core.documents import Document

from ragtiller.core.tiers import SearchRequest
from ragtiller.index import EmbeddedIndex
from ragtiller.ingest import build_index
from ragtiller.models import embedder_identity, local_embedder

pytestmark = pytest.mark.slow

DOCS = [
    Document(
        page_content="To stop a running coroutine task, call its cancel method.",
        metadata={"source": "tasks"},
    ),
    Document(
        page_content="SQLite cursors fetch rows from a database table.",
        metadata={"source": "sqlite"},
    ),
    Document(
        page_content="JSON text is parsed into Python dicts and lists.", metadata={"source": "json"}
    ),
]


def test_minilm_builds_a_semantic_index_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    embedder = local_embedder()
    assert embedder_identity(embedder) == ("sentence-transformers/all-MiniLM-L6-v2", 384)
    index = build_index(DOCS, embedder=embedder, progress=False)
    query = "how do I abort an async job?"  # shares no content word with the answer
    hits = index.tiers[0].search(
        SearchRequest(query=query, vector=embedder.embed_query(query), k=3)
    )
    assert hits[0]["doc_id"] == "tasks"
    assert np.linalg.norm(index.store.vectors, axis=1) == pytest.approx(1.0, abs=1e-5)
    index.save(tmp_path / "idx")
    loaded = EmbeddedIndex.load(tmp_path / "idx", embedder=embedder)
    assert loaded.manifest.embedder.dimension == 384


def test_minilm_async_embedding_does_not_block_the_loop() -> None:
    embedder = local_embedder()
    embedder.embed_query("warm up")  # load the model outside the measurement

    async def run() -> tuple[int, list[list[float]]]:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.001)
                ticks += 1

        task = asyncio.create_task(ticker())
        vectors = await embedder.aembed_documents([d.page_content * 20 for d in DOCS] * 8)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return ticks, vectors

    ticks, vectors = asyncio.run(run())
    assert len(vectors) == 24 and len(vectors[0]) == 384
    assert ticks >= 10, "the event loop kept ticking while the model ran"
