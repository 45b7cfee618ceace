"""The retriever's documents carry their own scores and provenance; the manifest comes once.

Before (issue 24), every returned document held a copy of the whole run manifest: three
documents came to about 33 KB, 28 KB of it manifest copies. Now each call sends the manifest
once, as the ``ragtiller_manifest`` custom callback event of the retriever's run.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.documents import Document

from ragtiller import RunManifest, build_graph
from ragtiller.ingest import build_index, stdlib_documents
from ragtiller.integrations.langchain import (
    MANIFEST_EVENT,
    RUN_ID_KEY,
    ManifestCollector,
    RagtillerRetriever,
    as_retriever,
)
from ragtiller.models import HashingEmbedder

QUESTION = "how do I pretty print json with indent?"
PROVENANCE = ("id", "citation", "doc_id", "source", "parent_id")
SCORES = ("fused_score", "final_score")
METADATA_BYTES = 1_500
"""Ceiling on one document's metadata as JSON; one manifest alone is over 9 KB here."""


@pytest.fixture(scope="module")
def retriever() -> RagtillerRetriever:
    documents = stdlib_documents(
        modules=("json", "pathlib"), include_topics=False, include_builtins=False
    )
    index = build_index(documents, embedder=HashingEmbedder(), progress=False)
    return as_retriever(build_graph(index=index), k=3)


def size(value: Any) -> int:
    return len(json.dumps(value, default=str).encode())


async def call(
    retriever: RagtillerRetriever, mode: str, query: str = QUESTION
) -> tuple[list[Document], ManifestCollector]:
    collector = ManifestCollector()
    config: Any = {"callbacks": [collector]}
    if mode == "sync":
        return retriever.invoke(query, config=config), collector
    return await retriever.ainvoke(query, config=config), collector


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_documents_carry_their_scores_and_provenance_and_no_manifest(
    retriever: RagtillerRetriever, mode: str
) -> None:
    docs, collector = await call(retriever, mode)
    assert len(docs) == 3
    (manifest,) = collector.manifests
    assert size(manifest) > METADATA_BYTES  # what each document used to carry
    for doc in docs:
        assert all(key in doc.metadata for key in (*PROVENANCE, *SCORES))
        assert doc.metadata[RUN_ID_KEY] == manifest["run_id"]
        assert size(doc.metadata) < METADATA_BYTES, sorted(doc.metadata)
        assert "stages" not in json.dumps(doc.metadata, default=str)
    text = sum(len(doc.page_content.encode()) for doc in docs)
    assert size([doc.model_dump() for doc in docs]) < text + 3 * METADATA_BYTES
    assert [d.metadata["citation"] for d in docs] == [1, 2, 3]


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_each_call_sends_its_manifest_once(retriever: RagtillerRetriever, mode: str) -> None:
    docs, collector = await call(retriever, mode)
    (manifest,) = collector.manifests
    parsed = RunManifest.model_validate(manifest)
    assert parsed.rerank_query == QUESTION and parsed.overrides == {"top_k": 3}
    assert [s.id for s in parsed.reranked or parsed.fused][:3] == [d.metadata["id"] for d in docs]


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_turn_without_documents_still_says_why(
    retriever: RagtillerRetriever, mode: str
) -> None:
    docs, collector = await call(retriever, mode, "hi")
    assert docs == []
    (manifest,) = collector.manifests
    assert manifest["query_type"] == "no_retrieval" and manifest["no_retrieval_reason"]


async def test_concurrent_calls_on_one_retriever_each_get_their_own_manifest(
    retriever: RagtillerRetriever,
) -> None:
    queries = [QUESTION, "how do I glob files recursively?", "json loads a string"]
    collector = ManifestCollector()
    results = await retriever.abatch(queries, config={"callbacks": [collector]})
    assert len(collector.manifests) == len(queries)
    by_run = {m["run_id"]: m for m in collector.manifests}
    for query, docs in zip(queries, results, strict=True):
        assert docs
        (run_id,) = {d.metadata[RUN_ID_KEY] for d in docs}
        assert by_run[run_id]["rerank_query"] == query


async def test_the_manifest_is_one_custom_event_of_the_retriever_run(
    retriever: RagtillerRetriever,
) -> None:
    events = [e async for e in retriever.astream_events(QUESTION, version="v2")]
    (start,) = [e for e in events if e["event"] == "on_retriever_start"]
    ours = [e for e in events if e["event"] == "on_custom_event" and e["name"] == MANIFEST_EVENT]
    assert len(ours) == 1 and ours[0]["run_id"] == start["run_id"]
    (end,) = [e for e in events if e["event"] == "on_retriever_end"]
    assert {d.metadata[RUN_ID_KEY] for d in end["data"]["output"]} == {ours[0]["data"]["run_id"]}
