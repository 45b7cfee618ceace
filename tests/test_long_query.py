"""A query longer than the embedder's window: embedded window by window, the vectors averaged.

``budgets.query_window_words`` (None by default). The embedder here truncates its input at
``WINDOW`` words, as MiniLM truncates at 256 wordpieces, so words past the window are lost to
the dense tier unless the query is embedded in windows.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from langchain_core.documents import Document
from langgraph.checkpoint.memory import InMemorySaver

from ragtiller import build_graph, load_policy
from ragtiller.eval.variants import with_overrides
from ragtiller.index import EmbeddedIndex
from ragtiller.ingest import build_index
from ragtiller.models import HashingEmbedder
from ragtiller.models.batch_embedding import normalize_rows
from ragtiller.nodes.embed import _mean_vector, query_windows
from ragtiller.policies import RetrievalPolicy

WINDOW = 8


class TruncatingEmbedder(HashingEmbedder):
    """The hashing embedder reading only the first ``WINDOW`` words of a query."""

    def embed_query(self, text: str) -> list[float]:
        return super().embed_query(" ".join(text.split()[:WINDOW]))


EMBEDDER = TruncatingEmbedder(dim=256)
HEAD = "tell me everything that is known about the subject below please"  # 11 words
QUERY = f"{HEAD} glacier moraine sediment"
DOCS = {
    "ice.md": "Glacier moraine sediment is left where the ice retreats.",
    "help.md": "Tell me everything that is known: a page about asking for help, please.",
}


@pytest.fixture(scope="module")
def index() -> EmbeddedIndex:
    docs = [Document(page_content=t, metadata={"source": s}) for s, t in DOCS.items()]
    return build_index(docs, embedder=EMBEDDER, progress=False)


def dense_only(**fields: Any) -> RetrievalPolicy:
    base = {"fusion.tier_weights": {"dense": 1.0, "lexical": 0.0, "parent_child": 0.0}}
    return with_overrides(load_policy(), {**base, "feedback.dense": "off", **fields})


def first_source(graph: Any) -> str:
    out = graph.invoke({"query": QUERY})
    return str(out["documents"][0].metadata["source"]).split("/")[-1]


def test_the_words_past_the_window_reach_the_dense_tier(index: EmbeddedIndex) -> None:
    whole = build_graph(dense_only(), index=index, embedder=EMBEDDER)
    windowed = build_graph(
        dense_only(**{"budgets.query_window_words": WINDOW}), index=index, embedder=EMBEDDER
    )
    assert first_source(whole) == "help.md"  # the truncated query is only its polite head
    assert first_source(windowed) == "ice.md"
    out = windowed.invoke({"query": QUERY})
    assert out["manifest"].stage("embed").detail["windows"] == 2
    assert "windows" not in whole.invoke({"query": QUERY})["manifest"].stage("embed").detail


def test_a_checkpointed_thread_embeds_in_windows_as_a_plain_invoke(index: EmbeddedIndex) -> None:
    policy = dense_only(**{"budgets.query_window_words": WINDOW})
    plain = build_graph(policy, index=index, embedder=EMBEDDER).invoke({"query": QUERY})
    graph = build_graph(policy, index=index, embedder=EMBEDDER, checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "long"}}
    graph.invoke({"query": "glacier"}, config)  # an earlier turn on the thread
    threaded = graph.invoke({"query": QUERY}, config)
    assert [d.page_content for d in threaded["documents"]] == [
        d.page_content for d in plain["documents"]
    ]
    assert threaded["manifest"].stage("embed").detail["windows"] == 2


def test_the_query_vector_is_the_mean_of_its_windows(index: EmbeddedIndex) -> None:
    windows = query_windows(QUERY, WINDOW)
    assert windows == [" ".join(QUERY.split()[:WINDOW]), " ".join(QUERY.split()[WINDOW:])]
    expected = normalize_rows(normalize_rows([EMBEDDER.embed_query(w) for w in windows]).mean(0))
    assert np.allclose(_mean_vector(EMBEDDER, windows), expected[0], atol=1e-6)
    assert query_windows("short query", WINDOW) == ["short query"]
    assert query_windows(QUERY, None) == [QUERY]
