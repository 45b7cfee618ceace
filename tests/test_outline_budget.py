"""The corpus outline of a broad turn is bounded in words, keeps the part the question is about,
and can be switched off (issue 44, item 5: it took 550 of a tool's 748 words)."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.documents import Document
from langgraph.checkpoint.memory import InMemorySaver

from ragtiller import build_graph, load_policy
from ragtiller.index import EmbeddedIndex
from ragtiller.ingest import build_index
from ragtiller.models import HashingEmbedder
from ragtiller.nodes.assemble import fit_outline, words

TOPICS = ["retries", "billing", "webhooks", "scheduling", "workers", "metrics", "queues", "auth"]
BROAD = "give me an overview of how webhooks work"


@pytest.fixture(scope="module")
def index() -> EmbeddedIndex:
    docs = []
    for i, topic in enumerate(TOPICS * 4):
        sections = "\n\n".join(
            f"## {topic.title()} part {j}\n\nThis part explains {topic} step {j} in detail."
            for j in range(5)
        )
        text = f"# {topic.title()} guide {i}\n\nAll about {topic}.\n\n{sections}"
        docs.append(Document(page_content=text, metadata={"source": f"{topic}-{i}.md"}))
    return build_index(docs, embedder=HashingEmbedder(dim=64), progress=False)


def overview(out: dict[str, Any]) -> str:
    context = out["context"]
    assert "<project-overview>" in context
    return context.split("<project-overview>\n")[1].split("\n</project-overview>")[0]


def policy(**budgets: Any) -> Any:
    default = load_policy()
    return default.model_copy(update={"budgets": default.budgets.model_copy(update=budgets)})


def test_the_whole_outline_is_longer_than_the_bound(index: EmbeddedIndex) -> None:
    """The reproduction: the index's outline alone is several times the default bound."""
    assert words(index.overview(None, None) or "") > 3 * load_policy().budgets.outline_words


@pytest.mark.parametrize("threaded", [False, True])
def test_a_broad_turn_shows_the_part_of_the_outline_it_asks_about(
    index: EmbeddedIndex, threaded: bool
) -> None:
    graph = build_graph(index=index, checkpointer=InMemorySaver() if threaded else None)
    config = {"configurable": {"thread_id": "t"}} if threaded else None
    out = graph.invoke({"query": BROAD}, config)
    shown = overview(out)
    assert words(shown) <= load_policy().budgets.outline_words
    assert shown.startswith("Corpus: 32 documents")
    listed = [line for line in shown.splitlines() if line.startswith("- ")]
    assert listed and all("Webhooks" in line for line in listed)
    assert out["manifest"].stages[-1].detail["corpus_map"] is True


def test_outline_words_bounds_it_and_zero_switches_it_off(index: EmbeddedIndex) -> None:
    small = build_graph(index=index, policy=policy(outline_words=20)).invoke({"query": BROAD})
    assert words(overview(small)) <= 20
    off = build_graph(index=index, policy=policy(outline_words=0)).invoke({"query": BROAD})
    assert "<project-overview>" not in off["context"]
    assert off["manifest"].stages[-1].detail["corpus_map"] is False


def test_a_question_naming_no_document_gets_the_outline_start() -> None:
    outline = (
        "Corpus: 2 documents, 2 sections.\n- Alpha: one.\n- Beta: two.\n... and 5 more documents"
    )
    assert fit_outline(outline, "what is in here?", 150) == (
        "Corpus: 2 documents, 2 sections.\n- Alpha: one.\n- Beta: two."
    )
    assert fit_outline(outline, "beta", 150) == "Corpus: 2 documents, 2 sections.\n- Beta: two."
    assert fit_outline(outline, "beta", 0) == ""
