import asyncio
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.runnables import RunnableLambda

from ragtiller.core.run_manifest import RunManifest
from ragtiller.eval import EvalError, load_beir, run_eval, summarize
from ragtiller.eval.runner import arun_eval

TINY = Path(__file__).parent / "data" / "tiny_beir"

# query text -> chunk (chunk id, doc id) list the fake graph returns
RESULTS = {
    "what triggers boundary layer transition on a flat plate": [
        ("d1#0", "d1"),
        ("d1#1", "d1"),
        ("d2#0", "d2"),
    ],
    "stagnation point heat transfer in hypersonic flow": [("d6#0", "d6"), ("d3#0", "d3")],
    "aeroelastic flutter of wings and panels": [("d4#0", "d4")],
    "shock tube gas measurements": [("d6#0", "d6")],
    "how does a propeller slipstream affect lift on the wing": [],
}


def fake_graph(*, routes: dict[str, str] | None = None, fail_on: str | None = None) -> Any:
    state = {"in_flight": 0, "peak": 0}

    async def turn(inputs: dict[str, Any]) -> dict[str, Any]:
        query = inputs["query"]
        if query == fail_on:
            raise RuntimeError("tier exploded")
        state["in_flight"] += 1
        state["peak"] = max(state["peak"], state["in_flight"])
        await asyncio.sleep(0.01)
        state["in_flight"] -= 1
        docs = [
            Document(page_content="", id=cid, metadata={"id": cid, "doc_id": did})
            for cid, did in RESULTS[query]
        ]
        manifest = RunManifest(
            run_id="r",
            created_at="2026-01-01T00:00:00Z",
            policy_id="fake",
            policy_version="1",
            query_type=(routes or {}).get(query, "factual_lookup"),
            latency_ms={"embed": 2.0, "tier_search": 8.0},
            llm_calls=1 if "how" in query else 0,
        )
        return {"documents": docs, "context": "", "manifest": manifest.model_dump()}

    graph = RunnableLambda(turn)
    return graph, state


def test_run_eval_ranks_unique_doc_ids_in_document_order() -> None:
    graph, _ = fake_graph()
    run = run_eval(graph, load_beir(TINY), progress=False)
    assert list(run.results) == ["q1", "q2", "q3", "q4", "q5"]
    assert run.results["q1"].ranking == ("d1", "d2")
    assert run.results["q5"].ranking == ()
    assert (run.policy_id, run.policy_version) == ("fake", "1")
    assert run.results["q5"].manifest.llm_calls == 1


def test_concurrency_is_bounded() -> None:
    graph, state = fake_graph()
    run_eval(graph, load_beir(TINY), concurrency=2, progress=False)
    assert state["peak"] == 2


async def test_arun_eval_inside_a_loop() -> None:
    graph, _ = fake_graph()
    run = await arun_eval(graph, load_beir(TINY), concurrency=1, progress=False)
    assert len(run.results) == 5


def test_a_failing_turn_fails_the_eval_naming_the_query() -> None:
    graph, _ = fake_graph(fail_on="shock tube gas measurements")
    with pytest.raises(EvalError, match="query 'q4' failed in the graph: tier exploded"):
        run_eval(graph, load_beir(TINY), progress=False)


def test_summary_per_label_slice_and_overall() -> None:
    graph, _ = fake_graph()
    ds = load_beir(TINY, slices=TINY / "slices.tsv")
    summary = summarize(run_eval(graph, ds, progress=False), ds)
    assert list(summary) == ["all", "factual", "lexical", "synthesis"]
    overall = summary["all"]
    assert (overall.n_queries, overall.n_no_relevant) == (5, 1)
    # judged: q1 ndcg 1, q2 (d3 at rank 2) 1/log2(3), q3 (only d4, grade 1) and q5 (nothing)
    q3 = 1 / (2 + 1 / 1.584962500721156)
    assert overall.ndcg_at_10 == pytest.approx((1 + 1 / 1.584962500721156 + q3 + 0) / 4)
    assert overall.mrr_at_10 == pytest.approx((1 + 0.5 + 1 + 0) / 4)
    assert overall.recall_at_100 == pytest.approx((1 + 1 + 0.5 + 0) / 4)
    assert summary["synthesis"].n_no_relevant == 1
    assert summary["synthesis"].n_queries == 2
    assert overall.latency_ms["total"].p50 == 10.0
    assert overall.latency_ms["embed"].p95 == 2.0
    assert overall.llm_calls_per_turn == pytest.approx(1 / 5)


def test_without_labels_the_slice_is_the_route() -> None:
    routes = {"shock tube gas measurements": "exact_lexical_lookup"}
    graph, _ = fake_graph(routes=routes)
    ds = load_beir(TINY)
    summary = summarize(run_eval(graph, ds, progress=False), ds)
    assert list(summary) == ["all", "exact_lexical_lookup", "factual_lookup"]
    assert summary["exact_lexical_lookup"].ndcg_at_10 is None
