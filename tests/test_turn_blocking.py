"""No turn makes a blocking call on the event loop (issue 44, item 1).

The LangGraph server refuses blocking calls on its event loop. Creating a tqdm bar, even a
disabled one, creates tqdm's multiprocessing lock on first use (a write to the resource
tracker's pipe): bm25s' tokenizer made one per query, so a turn over an index the server had
not built itself failed, and the refused call left tqdm's class lock held. The test refuses any
tqdm bar while turns run, sync and async; ``test_studio_saved_index`` runs the server itself.
"""

from __future__ import annotations

from typing import Any

import pytest
import tqdm.std
from langchain_core.documents import Document

from ragtiller import build_graph
from ragtiller.ingest import build_index
from ragtiller.models import HashingEmbedder

PARAGRAPHS = [
    "A worker leases a job from the queue and holds it for the visibility timeout.",
    "The default visibility timeout of a job is thirty seconds, set per queue.",
    "A job whose lease ends without an acknowledgement returns to the queue.",
]
QUESTION = "what is the default visibility timeout of a job?"


def refuse(cls: Any, *args: Any, **kwargs: Any) -> Any:
    raise AssertionError("a tqdm bar was created on the turn path")


@pytest.fixture
def graph() -> Any:
    docs = [
        Document(page_content="\n\n".join(PARAGRAPHS), metadata={"id": f"jobs-{n}"})
        for n in range(3)
    ]
    index = build_index(docs, embedder=HashingEmbedder(), progress=False)
    return build_graph(index=index)


def test_a_sync_turn_creates_no_progress_bar(graph: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tqdm.std.tqdm, "__new__", refuse)
    out = graph.invoke({"query": QUESTION})
    assert out["documents"] and not out["manifest"].degraded
    assert {s["step"]: s["status"] for s in out["stages"]}["fuse"] == "done"


async def test_an_async_turn_creates_no_progress_bar(
    graph: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tqdm.std.tqdm, "__new__", refuse)
    out = await graph.ainvoke({"query": QUESTION})
    assert out["documents"] and not out["manifest"].degraded
