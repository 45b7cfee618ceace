"""Bring your own store: LangChain stores and retrievers as tiers, in a real graph.

Score semantics, filter push-down, tenant safety, roles and the async path, each against a
real engine: LangChain's ``InMemoryVectorStore``, an embedded persistent Chroma, Pinecone's
SDK against the loopback emulator, and ``BM25Retriever``.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fixtures.pinecone_emulator import API_KEY, PineconeEmulator
from langchain_chroma import Chroma
from langchain_community.retrievers import BM25Retriever
from langchain_core.documents import Document
from langchain_core.vectorstores import InMemoryVectorStore
from langchain_pinecone import PineconeVectorStore
from pinecone import Pinecone

from ragtiller import build_graph
from ragtiller.adapters import OVERFETCH, RetrieverTier, VectorStoreTier, as_tier
from ragtiller.core.tiers import SearchRequest, tier_role
from ragtiller.errors import ConfigurationError
from ragtiller.integrations.langchain import ManifestCollector, as_retriever
from ragtiller.models import HashingEmbedder
from ragtiller.policies import load_policy
from ragtiller.policies.decisions import plan_tiers
from ragtiller.testing.tiers import contract_corpus, text_of

EMB = HashingEmbedder(dim=64)
QUESTION = "how do I cancel a running task before it finishes"


def memory_store(docs: Sequence[Document] | None = None) -> InMemoryVectorStore:
    store = InMemoryVectorStore(EMB)
    store.add_documents(list(docs if docs is not None else contract_corpus()))
    return store


def chroma_store(path: Path, space: str = "l2", name: str = "docs") -> Chroma:
    store = Chroma(
        collection_name=name,
        embedding_function=EMB,
        persist_directory=str(path),
        collection_configuration={"hnsw": {"space": space}},
    )
    docs = contract_corpus()
    store.add_documents(docs, ids=[str(d.id) for d in docs])
    return store


def request(text: str, k: int = 10, **scope: Any) -> SearchRequest:
    return SearchRequest(query=text, vector=EMB.embed_query(text), k=k, **scope)


def vec(text: str) -> np.ndarray:
    return np.asarray(EMB.embed_query(text), dtype=np.float64)


def doc_ids(out: dict[str, Any]) -> list[str]:
    return [d.metadata["id"] for d in out["documents"]]


def tier_stages(out: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["detail"]["tier"]: s for s in out["stages"] if s["step"] == "tier_search"}


# --- a bare store or retriever is a tier -----------------------------------------------------


def test_a_bare_in_memory_store_is_a_tier_of_build_graph() -> None:
    """Regression: this raised ``AttributeError: ... has no attribute 'name'``."""
    graph = build_graph(require_tenant=False, tiers=[memory_store()], embedder=EMB)
    out = graph.invoke({"query": QUESTION})
    assert doc_ids(out)[0] == "t1"
    assert tier_stages(out)["dense"]["status"] == "done"


def test_an_index_may_hold_a_store_and_a_retriever() -> None:
    class MyIndex:
        embedder = EMB
        tiers = (memory_store(), BM25Retriever.from_documents(contract_corpus()))

    out = build_graph(index=MyIndex(), require_tenant=False).invoke({"query": QUESTION})
    assert {"dense", "lexical"} <= set(tier_stages(out))
    assert doc_ids(out)[0] == "t1"


def test_what_is_not_a_tier_is_refused_naming_what_it_lacks() -> None:
    with pytest.raises(ConfigurationError, match=r"tiers\[1\] is a dict: .*lacks name"):
        build_graph(tiers=[memory_store(), {"name": "x"}], embedder=EMB)
    with pytest.raises(ConfigurationError, match=r"names must be unique.*VectorStoreTier"):
        build_graph(tiers=[memory_store(), memory_store()], embedder=EMB)


# --- score semantics ---------------------------------------------------------------------------


def test_in_memory_scores_are_cosine_similarities() -> None:
    tier = as_tier(memory_store())
    assert isinstance(tier, VectorStoreTier) and tier.scores.kind == "similarity"
    hits = tier.search(request("the event loop", namespaces=None))
    q = vec("the event loop")
    for h in hits:
        v = vec(h["text"])
        assert h["score"] == pytest.approx(float(q @ v / np.linalg.norm(q) / np.linalg.norm(v)))


@pytest.mark.parametrize("space", ["l2", "cosine", "ip"])
def test_chroma_distances_become_one_minus_the_distance(tmp_path: Path, space: str) -> None:
    tier = VectorStoreTier(chroma_store(tmp_path, space))
    assert tier.scores.kind == "distance"
    assert tier.scores.scale.startswith(
        {"l2": "squared L2", "cosine": "cosine", "ip": "inner"}[space]
    )
    q = vec("the event loop")
    hits = tier.search(request("the event loop"))
    assert len(hits) == len(contract_corpus())
    for h in hits:
        v = vec(h["text"])
        distance = {
            "l2": float(np.sum((q - v) ** 2)),
            "cosine": 1 - float(q @ v / np.linalg.norm(q) / np.linalg.norm(v)),
            "ip": 1 - float(q @ v),
        }[space]
        assert h["score"] == pytest.approx(1 - distance, abs=1e-4)


def test_a_retriever_without_scores_is_fused_by_rank() -> None:
    tier = RetrieverTier(BM25Retriever.from_documents(contract_corpus()))
    hits = tier.search(request("queue put blocks while the queue is full", k=4))
    assert [h["score"] for h in hits] == [1.0, 0.75, 0.5, 0.25]
    assert {hits[0]["id"], hits[1]["id"]} == {"q1", "o1"}


def test_a_store_declared_without_scores_keeps_its_order_and_is_fused_by_rank() -> None:
    ranked = VectorStoreTier(memory_store(), scores="none").search(request("the event loop", k=5))
    scored = VectorStoreTier(memory_store()).search(request("the event loop", k=5))
    assert [h["id"] for h in ranked] == [h["id"] for h in scored]
    assert [h["score"] for h in ranked] == [1.0, 0.8, 0.6, 0.4, 0.2]


@pytest.fixture
def pinecone_store() -> Iterator[PineconeVectorStore]:
    with (
        PineconeEmulator(dimension=64) as emulator,
        Pinecone(api_key=API_KEY).Index(host=emulator.host) as index,
    ):
        yield PineconeVectorStore(index=index, embedding=EMB)


def test_a_store_whose_scores_are_unknown_must_declare_them(
    pinecone_store: PineconeVectorStore,
) -> None:
    with pytest.raises(ConfigurationError, match=r"scores='similarity' \| 'distance' \| 'none'"):
        build_graph(tiers=[pinecone_store], embedder=EMB)
    pinecone_store.add_documents(contract_corpus(), ids=[str(d.id) for d in contract_corpus()])
    tier = VectorStoreTier(pinecone_store, scores="similarity")
    assert tier.method == "similarity_search_by_vector_with_score" and tier.pushdown == "none"
    hits = tier.search(request(text_of("t1"), filter={"tenant": "acme"}))
    assert hits[0]["id"] == "t1" and hits[0]["score"] == pytest.approx(1.0, abs=1e-4)
    assert {h["metadata"]["tenant"] for h in hits} == {"acme"}


# --- filters pushed down, or applied to results ------------------------------------------------


def spy(monkeypatch: pytest.MonkeyPatch, obj: Any, method: str) -> list[dict[str, Any]]:
    """Record the keyword arguments of ``obj.method`` calls; the real method still runs."""
    calls: list[dict[str, Any]] = []
    real = getattr(obj, method)

    def recording(*args: Any, **kwargs: Any) -> Any:
        calls.append({**kwargs, "thread": threading.current_thread().name})
        return real(*args, **kwargs)

    monkeypatch.setattr(obj, method, recording)
    return calls


def test_chroma_gets_the_scope_in_its_where_syntax(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = chroma_store(tmp_path)
    tier = VectorStoreTier(store)
    calls = spy(monkeypatch, store, tier.method)
    scope = {"namespaces": ["api", "other"], "filter": {"tenant": "acme", "color": ["red", "x"]}}
    hits = tier.search(request(text_of("q1"), k=3, **scope))
    assert [h["id"] for h in hits] == ["q1"]
    assert calls[-1]["filter"] == {
        "$and": [
            {"tenant": {"$eq": "acme"}},
            {"color": {"$in": ["red", "x"]}},
            {"namespace": {"$in": ["api", "other"]}},
        ]
    }
    assert calls[-1]["k"] == 3  # all pushed down: no over-fetch
    # "default" also holds documents without a namespace key: checked on the results
    hits = tier.search(request(text_of("bare"), k=2, namespaces=["default"]))
    assert hits[0]["id"] == "bare"
    assert "filter" not in calls[-1] and calls[-1]["k"] == 2 * OVERFETCH


def test_in_memory_gets_the_whole_scope_as_a_predicate(monkeypatch: pytest.MonkeyPatch) -> None:
    store = memory_store()
    calls = spy(monkeypatch, store, "similarity_search_with_score_by_vector")
    hits = VectorStoreTier(store).search(request(text_of("l1"), k=1, filter={"tenant": "acme"}))
    assert [h["id"] for h in hits] == ["l2"]  # l1 is globex's: the best of acme's comes back
    assert callable(calls[-1]["filter"]) and calls[-1]["k"] == 1


def test_a_retriever_is_filtered_on_its_results_after_over_fetching(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    retriever = BM25Retriever.from_documents(contract_corpus(), k=2)
    tier = RetrieverTier(retriever)
    hits = tier.search(request(text_of("l1"), k=2, filter={"tenant": "acme"}))
    assert hits and all(h["metadata"]["tenant"] == "acme" for h in hits)
    assert retriever.k == 2  # asked through a copy with k = 2 x OVERFETCH
    assert len(hits) == 2


def test_no_push_down_still_never_returns_another_tenant(tmp_path: Path) -> None:
    tier = VectorStoreTier(chroma_store(tmp_path), pushdown="none")
    for target in ("t3", "l1", "q2"):  # globex's documents, asked by their own text
        hits = tier.search(request(text_of(target), k=3, filter={"tenant": "acme"}))
        assert hits and {h["metadata"]["tenant"] for h in hits} == {"acme"}


@pytest.mark.parametrize("store", ["memory", "chroma"])
def test_a_filter_on_a_hit_field_finds_what_the_hit_shows(tmp_path: Path, store: str) -> None:
    """``doc_id`` (here the store's own id: no metadata names one), ``parent_id`` and
    ``source`` are filtered as the hit shows them, whatever the store holds as metadata."""
    docs = [
        Document(d.page_content, id=d.id, metadata=without(d.metadata, "doc_id"))
        for d in contract_corpus()
    ]
    if store == "memory":
        tier = VectorStoreTier(memory_store(docs))
    else:
        chroma = Chroma("bare", embedding_function=EMB, persist_directory=str(tmp_path))
        chroma.add_documents(docs, ids=[str(d.id) for d in docs])
        tier = VectorStoreTier(chroma)
    shown = {h["id"]: h for h in tier.search(request(text_of("t2"), k=10))}["t2"]
    assert shown["doc_id"] == "t2" and "doc_id" not in shown["metadata"]
    for field, value, ids in [("doc_id", "t2", {"t2"}), ("parent_id", "p1", {"t1", "t2"})]:
        hits = tier.search(request(text_of("t2"), k=3, filter={field: value, "tenant": "acme"}))
        assert {h["id"] for h in hits} == ids, field


@pytest.mark.parametrize("value", [True, 1, 1.0])
def test_a_flag_filter_is_compared_as_chroma_compares_it(tmp_path: Path, value: Any) -> None:
    """A bool never matches a number; an int matches the float of its value."""
    flagged = [Document(id=n, page_content=n, metadata={"flag": v}) for n, v in FLAGS.items()]
    memory = VectorStoreTier(memory_store(flagged))
    chroma = Chroma("flags", embedding_function=EMB, persist_directory=str(tmp_path))
    chroma.add_documents(flagged, ids=list(FLAGS))
    asked = request("flag", k=10, filter={"flag": value})
    found = [{h["id"] for h in tier.search(asked)} for tier in (memory, VectorStoreTier(chroma))]
    assert found == [{"bool"} if value is True else {"int", "float"}] * 2


FLAGS: dict[str, Any] = {"bool": True, "int": 1, "float": 1.0, "zero": 0}


def without(metadata: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in metadata.items() if k != key}


def test_a_run_filter_reaches_every_tier_with_the_tenant(tmp_path: Path) -> None:
    graph = build_graph(
        require_tenant=False,
        tiers=[
            VectorStoreTier(chroma_store(tmp_path), name="chroma"),
            RetrieverTier(BM25Retriever.from_documents(contract_corpus()), name="bm25"),
        ],
        embedder=EMB,
    )
    retriever = as_retriever(
        graph,
        k=10,
        search_kwargs={
            "tenant": "acme",
            "namespace": ["default", "api"],
            "filter": {"color": ["red", "green"]},
        },
    )
    collector = ManifestCollector()
    # globex's red document, asked by its own words
    docs = retriever.invoke(text_of("t3"), config={"callbacks": [collector]})
    assert {d.metadata["id"] for d in docs} <= {"t1", "l2", "q1"} and docs
    assert all(d.metadata["tenant"] == "acme" for d in docs)
    assert collector.manifests[0]["overrides"]["filter"] == {"color": ["red", "green"]}


# --- roles ---------------------------------------------------------------------------------------


def no_hybrid_policy() -> Any:
    policy = load_policy(None)
    routes = {n: r.model_copy(update={"hybrid": False}) for n, r in policy.routes.items()}
    return policy.model_copy(update={"routes": routes})


def test_hybrid_switches_a_text_role_retriever_whatever_its_name(tmp_path: Path) -> None:
    tiers = [
        VectorStoreTier(chroma_store(tmp_path), name="chroma"),
        RetrieverTier(BM25Retriever.from_documents(contract_corpus()), name="bm25"),
        RetrieverTier(BM25Retriever.from_documents(contract_corpus()), name="web", role="web"),
    ]
    assert [tier_role(t) for t in tiers] == ["dense", "lexical", "web"]
    stages = tier_stages(
        build_graph(no_hybrid_policy(), require_tenant=False, tiers=tiers, embedder=EMB).invoke(
            {"query": QUESTION}
        )
    )
    assert stages["bm25"]["status"] == "skipped" and stages["bm25"]["reason"] == "hybrid-off"
    assert stages["chroma"]["status"] == "done" and stages["web"]["status"] == "done"
    stages = tier_stages(
        build_graph(require_tenant=False, tiers=tiers, embedder=EMB).invoke({"query": QUESTION})
    )
    assert {n: s["status"] for n, s in stages.items()} == {
        "chroma": "done",
        "bm25": "done",
        "web": "done",
    }


def test_plan_tiers_reads_roles_not_names() -> None:
    roles = {"chroma": "dense", "bm25": "lexical", "sections": "parent_child", "web": "web"}
    run, skipped = plan_tiers(
        roles, ["chroma", "sections"], has_vector=True, hybrid=False, parent_child=False
    )
    assert run == ["chroma", "web"]
    assert skipped == {"bm25": "hybrid-off", "sections": "parent-child-off"}
    run, skipped = plan_tiers(
        roles, ["chroma", "sections"], has_vector=False, hybrid=False, parent_child=True
    )
    assert run == ["bm25", "web"]  # no vector: the lexical tier answers regardless
    assert skipped == {"chroma": "no-vector", "sections": "no-vector"}


def test_plan_tiers_skips_a_tier_fusion_weighs_0_but_never_the_last_nor_a_lexical_one() -> None:
    roles = {"chroma": "dense", "bm25": "lexical", "sections": "parent_child"}
    flags = {"has_vector": True, "hybrid": True, "parent_child": True}
    muted = {"sections": 0.0, "bm25": 0.0, "chroma": 1.0}
    run, skipped = plan_tiers(roles, ["chroma", "sections"], **flags, weights=muted)
    assert run == ["chroma", "bm25"]  # the rerank edge reads the lexical hits: it still runs
    assert skipped == {"sections": "weight-0"}
    silent = {"sections": 0.0, "chroma": 0.0}  # nothing else to search: the muted tiers run
    run, skipped = plan_tiers(
        {"chroma": "dense", "sections": "parent_child"}, [], **flags, weights=silent
    )
    assert (run, skipped) == (["chroma", "sections"], {})


# --- the async path ---------------------------------------------------------------------------


class AsyncMemoryStore(InMemoryVectorStore):
    """An in-memory store with an async twin of its own, as a store with an async client has."""

    async_calls: int = 0

    async def asimilarity_search_with_score_by_vector(
        self, embedding: list[float], k: int = 4, filter: Any = None, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        await asyncio.sleep(0)
        type(self).async_calls += 1
        return self.similarity_search_with_score_by_vector(embedding, k=k, filter=filter)


def test_a_store_with_its_own_async_twin_is_awaited_under_ainvoke(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = AsyncMemoryStore(EMB)
    store.add_documents(contract_corpus())
    tier = VectorStoreTier(store)
    assert tier.native_async
    calls = spy(monkeypatch, store, "similarity_search_with_score_by_vector")
    out = asyncio.run(
        build_graph(require_tenant=False, tiers=[tier], embedder=EMB).ainvoke({"query": QUESTION})
    )
    assert doc_ids(out)[0] == "t1"
    assert AsyncMemoryStore.async_calls == 1
    assert calls and not calls[-1]["thread"].startswith("ragtiller-tier")  # on the loop


def test_a_sync_only_store_runs_on_its_own_worker_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    store = memory_store()
    tier = VectorStoreTier(store, name="memory")
    assert not tier.native_async
    calls = spy(monkeypatch, store, "similarity_search_with_score_by_vector")
    out = asyncio.run(
        build_graph(require_tenant=False, tiers=[tier], embedder=EMB).ainvoke({"query": QUESTION})
    )
    assert doc_ids(out)[0] == "t1"
    assert calls[-1]["thread"].startswith("ragtiller-tier-memory")


def test_asearch_answers_as_search_for_both_adapters(tmp_path: Path) -> None:
    for tier in (
        VectorStoreTier(chroma_store(tmp_path)),
        RetrieverTier(BM25Retriever.from_documents(contract_corpus())),
    ):
        r = request("event loop task", k=4, filter={"tenant": "acme"})
        assert asyncio.run(tier.asearch(r)) == tier.search(r)


# --- the contract can fail --------------------------------------------------------------------

LEAKY = """
import pytest
from langchain_core.vectorstores import InMemoryVectorStore
from ragtiller.adapters import VectorStoreTier
from ragtiller.testing import TierContract


class IgnoresTheScope(VectorStoreTier):
    def search(self, request):
        return super().search(type(request)(request.query, request.vector, request.k))


class TestLeaky(TierContract):
    @pytest.fixture
    def make_tier(self, contract_embedder):
        def make(docs):
            store = InMemoryVectorStore(contract_embedder)
            store.add_documents(list(docs))
            return IgnoresTheScope(store)
        return make
"""


def test_the_contract_fails_a_tier_that_ignores_the_scope(tmp_path: Path) -> None:
    (tmp_path / "test_leaky.py").write_text(LEAKY)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rf", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert done.returncode == 1, done.stdout[-2000:]
    failed = {
        line.split("::")[2].split()[0].split("[")[0]
        for line in done.stdout.splitlines()
        if line.startswith("FAILED")
    }
    assert {
        "test_namespaces_are_isolated",
        "test_a_tenant_sees_only_its_own_documents",
        "test_metadata_filters_are_equality_and_membership",
    } <= failed
    assert "test_hit_fields_come_from_metadata" not in failed
