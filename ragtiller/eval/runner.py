"""Run an eval dataset through the compiled graph that serves queries."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.runnables import Runnable
from pydantic import ValidationError
from tqdm.auto import tqdm

from ragtiller.core.providers import model_label
from ragtiller.core.run_manifest import RunManifest
from ragtiller.errors import EvalError
from ragtiller.eval.datasets import EvalDataset
from ragtiller.policies.schema import RetrievalPolicy


@dataclass(frozen=True)
class QueryResult:
    """What the metrics need from one turn (not the texts: whole articles over a large dataset
    would take gigabytes); ``ranking`` holds unique dataset document ids."""

    query_id: str
    ranking: tuple[str, ...]
    manifest: RunManifest
    answer_hits: tuple[bool, ...] = ()
    passage_words: tuple[int, ...] = ()
    context_words: int = 0


@dataclass(frozen=True)
class EvalRun:
    """Every query of a dataset, in its order, run once through one graph."""

    policy_id: str
    policy_version: str
    dataset_sha256: str
    results: Mapping[str, QueryResult]
    index: Mapping[str, Any] | None = None

    def slices(self, dataset: EvalDataset) -> dict[str, str]:
        """Query id -> slice: the dataset's label if it has labels, else the route chosen."""
        if dataset.labels is not None:
            return {qid: dataset.labels[qid] for qid in self.results}
        return {qid: r.manifest.query_type for qid, r in self.results.items()}


Evaluate = Callable[[RetrievalPolicy, EvalDataset], EvalRun]
"""Runs a policy over a dataset (on an index the caller chose)."""


def ranking_from_documents(
    documents: list[Document], key: Callable[[str], str] = str
) -> tuple[str, ...]:
    """Unique ``doc_id`` values in order of first appearance: passages of a document count once."""
    ids: dict[str, None] = {}
    for doc in documents:
        doc_id = doc.metadata.get("doc_id")
        if doc_id is None:
            raise EvalError(f"graph returned a document without metadata['doc_id']: id={doc.id!r}")
        ids[key(str(doc_id))] = None
    return tuple(ids)


def query_result(query_id: str, out: Any, dataset: EvalDataset) -> QueryResult:
    documents = out.get("documents") if isinstance(out, dict) else None
    if not isinstance(documents, list):
        raise EvalError(f"query {query_id!r}: graph output has no 'documents' list")
    answers = None if dataset.answers is None else dataset.answers[query_id]
    context = out.get("context")
    return QueryResult(
        query_id,
        ranking_from_documents(documents, dataset.document_key),
        _manifest(out.get("manifest")),
        answer_hits=()
        if answers is None
        else tuple(answers.held_by(d.page_content) for d in documents),
        passage_words=tuple(len(d.page_content.split()) for d in documents),
        context_words=len(context.split()) if isinstance(context, str) else 0,
    )


def _manifest(value: Any) -> RunManifest:
    if isinstance(value, RunManifest):
        return value
    try:
        return RunManifest.model_validate(value)
    except ValidationError as e:
        raise EvalError(f"graph output has no valid 'manifest': {e.error_count()} errors") from e


async def arun_eval(
    graph: Runnable[Any, Any], dataset: EvalDataset, *, concurrency: int = 8, progress: bool = True
) -> EvalRun:
    """Run every query of ``dataset`` through ``graph`` (the one that serves queries); a turn
    that fails fails the eval, as dropping queries would overstate quality."""
    if concurrency <= 0:
        raise ValueError(f"concurrency must be > 0, but got {concurrency}")
    gate = asyncio.Semaphore(concurrency)
    run_tag = uuid.uuid4().hex[:12]
    bar = tqdm(total=len(dataset.queries), desc=f"eval {dataset.name}", disable=not progress)

    async def one(query_id: str, text: str) -> QueryResult:
        config: Any = {"configurable": {"thread_id": f"eval-{run_tag}-{query_id}"}}
        async with gate:
            try:
                out = await graph.ainvoke({"query": text}, config=config)
            except Exception as e:
                raise EvalError(f"query {query_id!r} failed in the graph: {e}") from e
        bar.update(1)
        return query_result(query_id, out, dataset)

    try:
        results = await asyncio.gather(*(one(q, t) for q, t in dataset.queries.items()))
    finally:
        bar.close()
    first = results[0].manifest if results else None
    return EvalRun(
        policy_id=first.policy_id if first else "",
        policy_version=first.policy_version if first else "",
        dataset_sha256=dataset.sha256,
        results={r.query_id: r for r in results},
    )


def run_eval(
    graph: Runnable[Any, Any], dataset: EvalDataset, *, concurrency: int = 8, progress: bool = True
) -> EvalRun:
    return asyncio.run(arun_eval(graph, dataset, concurrency=concurrency, progress=progress))


class QueryVectorCache(Embeddings):
    """Each distinct query embedded once, as tuning runs the same queries many times (not for
    serving: it grows without bound)."""

    def __init__(self, inner: Embeddings) -> None:
        self.inner = inner
        self.model_name = model_label(inner)  # the index checks it against its manifest
        self._vectors: dict[str, list[float]] = {}

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        if text not in self._vectors:
            self._vectors[text] = self.inner.embed_query(text)
        return self._vectors[text]

    async def aembed_query(self, text: str) -> list[float]:
        if text not in self._vectors:
            self._vectors[text] = await self.inner.aembed_query(text)
        return self._vectors[text]
