"""The stdlib demo corpus, and exact-identifier lookups through BM25 on it."""

from __future__ import annotations

import logging

import pytest

from ragtiller.core.tiers import SearchRequest
from ragtiller.index import ChunkingConfig, EmbeddedIndex
from ragtiller.ingest import build_index, chunk_documents, load_sources, stdlib_documents
from ragtiller.ingest.stdlib_corpus import DEFAULT_MODULES
from ragtiller.models import HashingEmbedder


@pytest.fixture(scope="module")
def small_index() -> EmbeddedIndex:
    # the first 150 documents: every reference topic, then the builtin exceptions
    return build_index(stdlib_documents(max_docs=150), embedder=HashingEmbedder(), progress=False)


def test_documents_come_from_topics_builtins_and_modules_in_a_fixed_order() -> None:
    docs = stdlib_documents()
    sources = [d.metadata["source"] for d in docs]
    assert sources == [d.metadata["source"] for d in stdlib_documents()]
    assert len(sources) == len(set(sources))
    assert sources[0] == "pydoc:topics/assert"
    assert "pydoc:topics/async" in sources
    assert "docstring:builtins.StopAsyncIteration" in sources
    assert "docstring:asyncio.gather" in sources
    assert "docstring:json" in sources
    assert {d.metadata["format"] for d in docs} == {"rst", "markdown"}
    gather = docs[sources.index("docstring:asyncio.gather")]
    assert gather.metadata["title"] == "asyncio.gather"
    assert gather.page_content.startswith("# asyncio.gather\n\nasyncio.gather(*coros_or_futures")


def test_classes_get_one_section_per_documented_method() -> None:
    docs = stdlib_documents(modules=["asyncio"], include_topics=False, include_builtins=False)
    task = next(d for d in docs if d.metadata["source"] == "docstring:asyncio.Task")
    assert "\n## asyncio.Task.cancel\n" in task.page_content


def test_max_docs_and_switches_limit_the_corpus() -> None:
    assert len(stdlib_documents(max_docs=5)) == 5
    only_json = stdlib_documents(modules=["json"], include_topics=False, include_builtins=False)
    assert only_json and all(d.metadata["source"].startswith("docstring:json") for d in only_json)


def test_the_default_module_list_covers_the_brief() -> None:
    for name in ("asyncio", "json", "pathlib", "concurrent.futures", "os.path", "sqlite3", "enum"):
        assert name in DEFAULT_MODULES


@pytest.mark.parametrize("identifier", ["StopAsyncIteration", "ZeroDivisionError", "KeyError"])
def test_exact_identifier_finds_its_defining_chunk_first_via_bm25(
    small_index: EmbeddedIndex, identifier: str
) -> None:
    lexical = next(t for t in small_index.tiers if t.name == "lexical")
    hits = lexical.search(SearchRequest(query=identifier, vector=None, k=5))
    assert hits[0]["doc_id"] == f"docstring:builtins.{identifier}"
    assert hits[0]["metadata"]["title"] == identifier
    assert len(hits) > 1, "other chunks mention it too, so the ranking is a real test"


def test_the_demo_corpus_stays_within_the_embedding_budget() -> None:
    # ~20 chunks/s with the ONNX MiniLM on 2 busy cores: 2300 chunks is about two minutes
    _, chunks = chunk_documents(load_sources(stdlib_documents())[0], ChunkingConfig())
    assert 1500 <= len(chunks) <= 2300


def test_the_corpus_is_the_same_in_every_process(monkeypatch: pytest.MonkeyPatch) -> None:
    def source_text(name: str) -> str:
        docs = stdlib_documents(modules=["logging"], include_topics=False, include_builtins=False)
        return next(d.page_content for d in docs if d.metadata["source"] == name)

    before = source_text("docstring:logging.Logger")

    def patched_on(self: logging.Logger) -> None:
        """Added at run time by some library."""

    monkeypatch.setattr(logging.Logger, "patched_on", patched_on, raising=False)
    assert source_text("docstring:logging.Logger") == before
    assert "patched_on" not in before
    assert source_text("docstring:logging.shutdown").startswith(
        "# logging.shutdown\n\nlogging.shutdown(handlerList=...)"
    )


def test_stdlib_corpus_is_identical_across_processes() -> None:
    """Signatures print default objects with memory addresses; those must not reach the text."""
    import subprocess
    import sys

    script = (
        "import hashlib\nfrom ragtiller.ingest import stdlib_documents\n"
        "print(hashlib.sha256(''.join(d.page_content for d in stdlib_documents()).encode()).hexdigest())"
    )
    runs = {
        subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, check=True
        ).stdout
        for _ in range(2)
    }
    assert len(runs) == 1
