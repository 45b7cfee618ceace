"""The compiled graph end to end, with fake tiers: edges, events, manifest, failure and bad input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fixtures.fakes import RaisingTier, ScriptedChatModel, StaticTier, hit
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding, Embeddings

from ragtiller import EVENT_TYPE, RetrievalPolicy, RunManifest, build_graph, load_policy
from ragtiller.core.tiers import STAGES, Candidate
from ragtiller.graph.builder import mermaid
from ragtiller.rerankers.base import RerankResult
from ragtiller.stores import MemoryQuotaLedger

SNAPSHOT = Path(__file__).parent / "snapshots" / "graph.mmd"
EXACT = "What does StopAsyncIteration mean?"
BROAD = "how do I get started with asyncio?"
FACTUAL = "which port does the server listen on by default"


def tiers() -> list[StaticTier]:
    return [
        StaticTier(
            "dense", [hit("dense", f"c{i}", 0.9 - i / 10, parent_id="p0") for i in range(5)]
        ),
        StaticTier(
            "parent_child", [hit("parent_child", "p0", 0.95), hit("parent_child", "p1", 0.4)]
        ),
        StaticTier(
            "lexical",
            [
                hit("lexical", "c3", 9.0, text="StopAsyncIteration is raised by __anext__"),
                hit("lexical", "c9", 4.0),
            ],
            needs_vector=False,
        ),
    ]


def graph(**kwargs: Any) -> Any:
    kwargs.setdefault("tiers", tiers())
    kwargs.setdefault("embedder", DeterministicFakeEmbedding(size=16))
    return build_graph(kwargs.pop("policy", None), require_tenant=False, **kwargs)


def run(g: Any, query: str, **inputs: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    events: list[dict[str, Any]] = []
    out: dict[str, Any] = {}
    for mode, chunk in g.stream({"query": query, **inputs}, stream_mode=["custom", "values"]):
        if mode == "custom":
            events.append(chunk)
        else:
            out = chunk
    return out, events


def final(events: list[dict[str, Any]], step: str) -> list[dict[str, Any]]:
    return [e for e in events if e["step"] == step and e["status"] != "active"]


@pytest.mark.parametrize("query", [EXACT, BROAD, FACTUAL, "hi", ""])
def test_every_stage_reports_in_order(query: str) -> None:
    _, events = run(graph(), query)
    assert all(e["type"] == EVENT_TYPE for e in events)
    order = [STAGES.index(e["step"]) for e in events]
    assert order == sorted(order), [e["step"] for e in events]
    assert {e["step"] for e in events if e["status"] != "active"} == set(STAGES)


def exact_rerank_policy(method: str = "rrf") -> RetrievalPolicy:
    """The default with rerank ``conditional`` on exact lookups (the default has it off),
    fusing by ``method`` (rank fusion: the hand-made lists here are too short for z-scores)."""
    policy = load_policy()
    exact = policy.routes["exact_lexical_lookup"].model_copy(update={"rerank": "conditional"})
    fusion = policy.fusion.model_copy(update={"method": method})
    routes = {**policy.routes, "exact_lexical_lookup": exact}
    return policy.model_copy(update={"routes": routes, "fusion": fusion})


def test_exact_lookup_runs_hybrid_and_skips_rerank_on_exact_match() -> None:
    out, events = run(graph(policy=exact_rerank_policy()), EXACT)
    m: RunManifest = out["manifest"]
    assert m.query_type == "exact_lexical_lookup"
    assert m.hybrid is not None and m.hybrid.enabled
    tiers = final(events, "tier_search")
    ran = {e["detail"]["tier"] for e in tiers if e["status"] == "done"}
    assert ran == {"dense", "lexical"}
    # the route turns parent-child on, but the default weighs it 0 in fusion: not searched
    muted = {e["detail"]["tier"]: e["detail"]["reason"] for e in tiers if e["status"] == "skipped"}
    assert muted == {"parent_child": "weight-0"}
    rerank = final(events, "rerank")[0]
    assert (rerank["status"], rerank["detail"]["reason"]) == ("done", "exact-match")
    assert out["documents"][0].metadata["id"] == "c3"


def synthesis_rerank_policy() -> RetrievalPolicy:
    """The default with rerank back on (``conditional``) for synthesis, to exercise the stage."""
    policy = load_policy()
    synthesis = policy.routes["synthesis"].model_copy(update={"rerank": "conditional"})
    return policy.model_copy(update={"routes": {**policy.routes, "synthesis": synthesis}})


def conditional_hybrid_policy() -> RetrievalPolicy:
    """The default with the factual route's hybrid switch back on ``conditional``."""
    policy = load_policy()
    factual = policy.routes["factual_lookup"].model_copy(update={"hybrid": "conditional"})
    return policy.model_copy(update={"routes": {**policy.routes, "factual_lookup": factual}})


def test_default_factual_route_runs_hybrid_and_the_rerank_floor() -> None:
    _, events = run(graph(), FACTUAL)
    ran = {e["detail"]["tier"] for e in final(events, "tier_search") if e["status"] == "done"}
    assert "lexical" in ran
    rerank = final(events, "rerank")[0]
    assert (rerank["status"], rerank["detail"]["reason"]) == ("done", "route-floor")
    assert rerank["detail"]["method"] == "zscore"


def test_conditional_hybrid_without_trigger_skips_lexical_tier() -> None:
    out, events = run(graph(policy=conditional_hybrid_policy()), FACTUAL)
    assert final(events, "rerank")[0]["detail"]["reason"] == "route-floor"
    lexical = next(e for e in final(events, "tier_search") if e["detail"]["tier"] == "lexical")
    assert (lexical["status"], lexical["detail"]["reason"]) == ("skipped", "hybrid-off")
    assert out["manifest"].rerank_method == "zscore"
    assert len(out["documents"]) <= 5


def test_default_synthesis_route_runs_the_rerank_floor() -> None:
    _, events = run(graph(), BROAD)
    assert final(events, "rerank")[0]["detail"]["reason"] == "route-floor"


def test_broad_turn_reranks_with_zscore_and_injects_corpus_map() -> None:
    out, events = run(
        graph(corpus_map="asyncio: tasks, streams", policy=synthesis_rerank_policy()), BROAD
    )
    assert final(events, "step_back")[0]["detail"]["reason"] == "no-llm"
    assert final(events, "rerank")[0]["detail"]["method"] == "zscore"
    assert "<project-overview>\nasyncio: tasks, streams\n</project-overview>" in out["context"]
    assert out["manifest"].parent_child is not None and out["manifest"].parent_child.enabled


@pytest.mark.parametrize(
    ("step_back_enabled", "chat", "budget", "query", "expected"),
    [
        (True, True, 20, FACTUAL, ("skipped", "narrow")),
        (False, True, 20, BROAD, ("skipped", "disabled")),
        (True, False, 20, BROAD, ("skipped", "no-llm")),
        (True, True, 0, BROAD, ("skipped", "quota")),
        (True, True, 20, BROAD, ("done", "generalized")),
    ],
)
def test_step_back_edge_per_policy_and_quota(
    step_back_enabled: bool, chat: bool, budget: int, query: str, expected: tuple[str, str]
) -> None:
    policy = load_policy()
    policy = policy.model_copy(
        update={"step_back": policy.step_back.model_copy(update={"enabled": step_back_enabled})}
    )
    model = ScriptedChatModel() if chat else None
    quota = MemoryQuotaLedger({"chat_gen": budget, "rerank_calls": 10})
    out, events = run(graph(policy=policy, chat_model=model, quota=quota), query)
    record = final(events, "step_back")[0]
    assert (record["status"], record["detail"]["reason"]) == expected
    assert out["manifest"].llm_calls == (1 if expected[0] == "done" else 0)
    assert ("step_back skipped: quota" in out["manifest"].degraded) == (expected[1] == "quota")


def test_spent_day_still_answers_labelled() -> None:
    quota = MemoryQuotaLedger({"chat_gen": 0, "rerank_calls": 0})
    out, _ = run(graph(chat_model=ScriptedChatModel(), quota=quota, corpus_map="MAP"), BROAD)
    assert out["documents"]
    assert "step_back skipped: quota" in out["context"]
    assert "<project-overview>" in out["context"]


def test_a_raising_tier_emits_error_and_turn_goes_on() -> None:
    broken = RaisingTier("lexical", [], needs_vector=False)
    out, events = run(graph(tiers=[*tiers()[:2], broken]), EXACT)
    lexical = final(events, "tier_search")[-1]
    assert (lexical["status"], lexical["detail"]["tier"]) == ("error", "lexical")
    assert "ConnectionError: lexical is down" in lexical["error"]
    assert out["documents"]
    assert out["manifest"].tier_errors == {"lexical": "ConnectionError: lexical is down"}
    assert "tier_search (lexical) failed: tier-failed" in out["manifest"].degraded


class FailingEmbedder(Embeddings):
    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        raise TimeoutError("embedding service timed out")

    def embed_query(self, text: str) -> list[float]:
        raise TimeoutError("embedding service timed out")


def test_embed_failure_falls_back_to_lexical_tier_labelled() -> None:
    # hybrid is off for this route, yet the lexical tier answers when there is no vector
    out, events = run(
        graph(embedder=FailingEmbedder(), policy=conditional_hybrid_policy()), FACTUAL
    )
    assert final(events, "embed")[0]["status"] == "error"
    ran = [e["detail"]["tier"] for e in final(events, "tier_search") if e["status"] == "done"]
    assert ran == ["lexical"]
    assert "embed failed: lexical tier only" in out["manifest"].degraded
    assert out["documents"]


class BrokenReranker:
    name = "broken"

    async def arerank(self, query: str, candidates: list[Candidate], top_n: int) -> RerankResult:
        raise RuntimeError("model crashed")


def test_rerank_provider_that_raises_falls_back_to_identity() -> None:
    out, events = run(graph(reranker=BrokenReranker(), policy=synthesis_rerank_policy()), BROAD)
    record = final(events, "rerank")[0]
    assert record["status"] == "error" and "RuntimeError: model crashed" in record["error"]
    assert out["manifest"].rerank_method == "identity"
    fused = [c.id for c in out["manifest"].fused]
    picked = [d.metadata["id"] for d in out["documents"]]
    assert picked == sorted(picked, key=fused.index)  # fusion order, minus chunks a parent covers
    assert "p0" not in picked  # its children c0.. are already in the context


class RecordingReranker:
    name = "recording"

    def __init__(self) -> None:
        self.queries: list[str] = []

    async def arerank(self, query: str, candidates: list[Candidate], top_n: int) -> RerankResult:
        self.queries.append(query)
        return RerankResult([{**c, "final_score": 1.0} for c in candidates][:top_n], "recording")


def test_step_back_changes_embed_query_but_never_rerank_query() -> None:
    reranker = RecordingReranker()
    model = ScriptedChatModel(reply="What is asynchronous programming in Python?")
    ts = tiers()
    g = graph(tiers=ts, chat_model=model, reranker=reranker, policy=synthesis_rerank_policy())
    out, _ = run(g, BROAD)
    m = out["manifest"]
    assert m.embed_query == "What is asynchronous programming in Python?"
    assert m.rerank_query == BROAD
    assert m.step_back.generalized == m.embed_query and m.step_back.original == BROAD
    assert reranker.queries == [BROAD]
    assert ts[0].calls[0]["query"] == "What is asynchronous programming in Python?"


def test_manifest_is_complete_and_json_serialisable() -> None:
    out, _ = run(graph(), EXACT)
    data = json.loads(out["manifest"].model_dump_json())
    required = {
        "policy_id",
        "policy_version",
        "router",
        "query_type",
        "candidate_namespaces",
        "selected_namespaces",
        "top_k",
        "hybrid",
        "parent_child",
        "rerank",
        "step_back",
        "tiers",
        "fused",
        "reranked",
        "latency_ms",
        "llm_calls",
        "cost_usd",
        "degraded",
        "stages",
        "embed_query",
        "rerank_query",
    }
    assert required <= set(data)
    assert set(data["latency_ms"]) == {*STAGES, "total"}
    assert data["tiers"]["dense"][0] == {"id": "c0", "score": pytest.approx(0.9)}
    assert [s["step"] for s in data["stages"]] == sorted(
        (s["step"] for s in data["stages"]), key=STAGES.index
    )
    assert RunManifest.model_validate(data) == out["manifest"]


def test_documents_carry_scores_and_citations() -> None:
    out, _ = run(graph(), BROAD)
    doc: Document = out["documents"][0]
    assert {
        "id",
        "citation",
        "doc_id",
        "source",
        "parent_id",
        "fused_score",
        "final_score",
    } <= set(doc.metadata)
    assert "tier_scores" not in doc.metadata  # raw scores tell of other tenants' words
    assert out["context"].startswith("[1] ")


def test_designed_documents_are_labelled_not_built() -> None:
    designed = StaticTier(
        "dense", [hit("dense", "d1", 0.9, status="designed", text="Planned: sharded index")]
    )
    out, _ = run(graph(tiers=[designed]), FACTUAL)
    assert "[designed, not built]" in out["context"]
    assert any("designed, not built" in label for label in out["manifest"].degraded)


@pytest.mark.parametrize("query", ["", "   ", "\n\t"])
def test_empty_query_returns_no_documents_and_says_why(query: str) -> None:
    out = graph().invoke({"query": query})
    assert out["documents"] == []
    assert out["manifest"].no_retrieval_reason == "empty-query"


def test_huge_query_is_truncated_for_embedding_and_labelled() -> None:
    query = "why does the boundary layer separate " * 200
    out = graph().invoke({"query": query})
    m = out["manifest"]
    assert len(m.embed_query) == 4000 and m.rerank_query == query[:4000]  # not copied whole
    assert m.query_truncated
    assert "query truncated to 4000 characters for embedding" in m.degraded


@pytest.mark.parametrize(
    "query",
    [
        "¿Cómo cancelo una tarea en asyncio?",
        "日本語の質問です、どうですか",
        "emoji 🚀 query about rockets",
        "\x00control\x7f chars here",
    ],
)
def test_any_unicode_is_handled(query: str) -> None:
    out = graph().invoke({"query": query})
    assert isinstance(out["context"], str)


def test_namespace_override_and_tenant_filter_reach_tiers() -> None:
    ts = tiers()
    graph(tiers=ts).invoke({"query": FACTUAL, "namespace": "tenant-a", "tenant": "acme"})
    assert ts[0].calls[0]["namespaces"] == ["tenant-a"]
    assert ts[0].calls[0]["filter"] == {"tenant": "acme"}


async def test_async_invoke_and_astream() -> None:
    g = graph()
    out = await g.ainvoke({"query": BROAD})
    assert out["documents"]
    events = [c async for c in g.astream({"query": BROAD}, stream_mode="custom")]
    assert {e["step"] for e in events} == set(STAGES)


def test_sync_invoke_and_stream_match_async_shape() -> None:
    g = graph()
    assert set(g.invoke({"query": EXACT})) == {
        "documents",
        "messages",
        "context",
        "manifest",
        "stages",
    }
    assert {e["step"] for e in g.stream({"query": EXACT}, stream_mode="custom")} == set(STAGES)


class RunNames(BaseCallbackHandler):
    def __init__(self) -> None:
        self.names: list[str | None] = []

    def on_chain_start(self, serialized: Any, inputs: Any, **kwargs: Any) -> None:
        self.names.append(kwargs.get("name"))


async def test_a_turn_traces_the_graph_and_its_nodes_but_no_edge_or_node_body() -> None:
    """Edges and node bodies run untraced: a callback run per edge costs several times more."""
    g = graph()
    runs = ["ragtiller", "__start__", "gate", "embed", "tier_search", "tier_search", "fuse"]
    runs += ["rerank", "assemble"]
    handler = RunNames()
    g.invoke({"query": FACTUAL}, config={"callbacks": [handler]})
    assert handler.names == runs
    handler = RunNames()
    await g.ainvoke({"query": FACTUAL}, config={"callbacks": [handler]})
    assert handler.names == runs


def test_no_tiers_is_a_clear_error() -> None:
    from ragtiller import ConfigurationError

    with pytest.raises(ConfigurationError, match="needs at least one tier"):
        build_graph(tiers=[])
    with pytest.raises(ConfigurationError, match=r"tiers \['dense'\] need query vectors"):
        build_graph(tiers=[StaticTier("dense", [])])


def test_tier_weights_may_name_index_tiers_but_not_misspellings() -> None:
    from ragtiller import ConfigurationError
    from ragtiller.eval.variants import with_overrides

    tiers = [StaticTier("lexical", [])]
    embedder = DeterministicFakeEmbedding(size=8)
    # the shipped default weighs parent_child: a graph of other tiers still builds with it
    build_graph(require_tenant=False, tiers=tiers, embedder=embedder)
    misspelled = with_overrides(load_policy(), {"fusion.tier_weights": {"lexcial": 1.0}})
    with pytest.raises(ConfigurationError, match=r"does not have: \['lexcial'\]"):
        build_graph(misspelled, tiers=tiers, embedder=embedder)


def test_graph_shape_snapshot() -> None:
    """A change of topology is a reviewed diff: regenerate with `ragtiller draw`."""
    assert graph().get_graph().draw_mermaid() == mermaid() == SNAPSHOT.read_text("utf-8")


def test_an_exact_match_is_settled_by_a_lexical_role_tier_of_any_name() -> None:
    """The switches read roles: a lexical tier named ``bm25`` settles an exact match."""
    renamed = tiers()
    renamed[2].name = "bm25"
    renamed[2].role = "lexical"  # type: ignore[attr-defined]
    renamed[2].hits = [dict(h, tier="bm25") for h in renamed[2].hits]  # type: ignore[misc]
    out, events = run(graph(policy=exact_rerank_policy(), tiers=renamed), EXACT)
    rerank = final(events, "rerank")[0]
    assert (rerank["status"], rerank["detail"]["reason"]) == ("done", "exact-match")
    assert out["documents"][0].metadata["id"] == "c3"


class AsyncOnlyTier(StaticTier):
    """A tier whose async path is its own: its blocking ``search`` must never be called."""

    native_async = True

    def search(self, request: Any) -> Any:
        raise AssertionError("a native-async tier ran on a thread")

    async def asearch(self, request: Any) -> Any:
        return self.hits[: request.k]


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_a_native_async_tier_is_awaited_on_its_asearch(mode: str) -> None:
    import asyncio

    mixed = tiers()
    mixed[0] = AsyncOnlyTier("dense", mixed[0].hits)
    g = graph(tiers=mixed)
    out = (
        g.invoke({"query": BROAD}) if mode == "invoke" else asyncio.run(g.ainvoke({"query": BROAD}))
    )
    dense = [
        s
        for s in out["manifest"].stages
        if s.step == "tier_search" and s.detail.get("tier") == "dense"
    ]
    assert dense and dense[0].status == "done", dense


def test_fusion_weights_reach_a_tier_by_its_role_when_its_name_has_none() -> None:
    """``tier_weights: {dense: 0}`` silences a dense-role tier named ``vec`` too."""
    renamed = tiers()
    for tier, (name, role) in zip(
        renamed, [("vec", "dense"), ("pc", "parent_child"), ("bm25", "lexical")], strict=True
    ):
        tier.name, tier.role = name, role  # type: ignore[attr-defined]
        tier.hits = [dict(h, tier=name) for h in tier.hits]  # type: ignore[misc]
    policy = exact_rerank_policy()
    weights = {"dense": 0.0, "parent_child": 0.0, "lexical": 1.0}
    policy = policy.model_copy(
        update={"fusion": policy.fusion.model_copy(update={"tier_weights": weights})}
    )
    out, _ = run(graph(policy=policy, tiers=renamed), BROAD)
    assert [d.metadata["id"] for d in out["documents"]][:2] == ["c3", "c9"]


def test_weights_by_name_prefers_the_name_then_the_role() -> None:
    from ragtiller.ranking.fusion import weights_by_name

    weights = {"dense": 0.5, "chroma": 2.0}
    roles = {"chroma": "dense", "vec": "dense", "web": "web"}
    assert weights_by_name(weights, roles) == {"dense": 0.5, "chroma": 2.0, "vec": 0.5}
