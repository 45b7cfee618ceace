"""The optional LLM router: fallbacks, the eval gate, quota, cache, and a turn through the graph."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from fixtures.fakes import StaticTier, hit
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.exceptions import OutputParserException
from langchain_core.language_models import BaseChatModel, GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable, RunnableLambda
from pydantic import Field

from ragtiller import ConfigurationError, RunManifest, build_graph, load_policy
from ragtiller.errors import StoreUnavailableError
from ragtiller.eval import EvalRun, QueryResult, compare_runs, decide, decision_artifact, load_beir
from ragtiller.eval.promotion import ARTIFACT_KIND, write_decision
from ragtiller.graph.builder import build_components
from ragtiller.policies.evidence import read_eval_evidence
from ragtiller.policies.schema import (
    DeadlinesConfig,
    PromotionConfig,
    RetrievalPolicy,
    RouterConfig,
    TriggerKind,
)
from ragtiller.routing.llm import LLMRouter, RouteChoice, make_llm_router, router_key
from ragtiller.routing.rules import Classification, classify, trigger_kind
from ragtiller.stores import MemoryCache, MemoryQuotaLedger
from ragtiller.stores._quota import Counter, QuotaWindow

FACTUAL = "which port does the gateway-server listen on by default"
"""The deterministic router reads a factual lookup: no trigger it knows fires."""
LEXICAL_CHOICE = RouteChoice(
    route="exact_lexical_lookup", is_broad=False, triggers=["gateway-server"], confidence=0.9
)
_DEFAULT = load_policy()
POLICY = _DEFAULT.model_copy(
    update={
        "routes": {
            **_DEFAULT.routes,
            # hybrid only on a trigger, so the LLM router's trigger visibly changes the edges
            "factual_lookup": _DEFAULT.routes["factual_lookup"].model_copy(
                update={"hybrid": "conditional"}
            ),
            # rerank on exact lookups unless the lexical tier matched exactly
            "exact_lexical_lookup": _DEFAULT.routes["exact_lexical_lookup"].model_copy(
                update={"rerank": "conditional"}
            ),
        }
    }
)
DETAIL_KEYS = {
    "router",
    "mode",
    "fallback_reason",
    "llm_calls",
    "from_cache",
    "confidence",
    "deterministic_route",
    "llm_route",
}


class StructuredRouterModel(BaseChatModel):
    """A chat model whose ``with_structured_output`` answers ``choice``; counts calls.

    ``choice`` may be anything the structured runnable could return (a RouteChoice, a dict, a
    string, None); ``error`` raises it, ``parse_error`` raises an ``OutputParserException``,
    ``delay_s`` stalls first.
    """

    choice: Any = LEXICAL_CHOICE
    error: str | None = None
    parse_error: bool = False
    delay_s: float = 0.0
    calls: int = 0
    prompts: list[str] = Field(default_factory=list)
    model_name: str = "fake-router"

    @property
    def _llm_type(self) -> str:
        return "structured-router"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=AIMessage("unstructured"))])

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        """Natively async, as its structured output is: the router awaits it on the loop."""
        return self._generate(messages, stop)

    def with_structured_output(  # type: ignore[override]
        self, schema: Any, *, include_raw: bool = False, **kwargs: Any
    ) -> Runnable[Any, Any]:
        assert schema is RouteChoice and not include_raw

        async def answer(messages: Sequence[BaseMessage]) -> Any:
            self.calls += 1
            self.prompts.append(str(messages[-1].content))
            if self.delay_s:
                await asyncio.sleep(self.delay_s)
            if self.error:
                raise RuntimeError(self.error)
            if self.parse_error:
                raise OutputParserException("tool call arguments are not valid JSON")
            return self.choice

        return RunnableLambda(answer)


class DownQuotaLedger(MemoryQuotaLedger):
    """A ledger whose store is unreachable: every spend fails closed."""

    async def _achange(
        self, counters: Sequence[tuple[Counter, int]], n: int, window: QuotaWindow
    ) -> tuple[bool, list[int]]:
        if n > 0:
            raise StoreUnavailableError("redis is down")
        return await super()._achange(counters, n, window)


def ledger(budget: int = 20) -> MemoryQuotaLedger:
    return MemoryQuotaLedger({"chat_gen": budget, "rerank_calls": 10})


def router(
    model: BaseChatModel | None,
    *,
    quota: MemoryQuotaLedger | None = None,
    cache: MemoryCache | None = None,
    chat_s: float = 10.0,
    **config: Any,
) -> LLMRouter:
    made = make_llm_router(
        RouterConfig(**{"llm_router": "on", **config}),
        chat_model=model,
        quota=quota or ledger(),
        cache=cache or MemoryCache(),
        trigger_kinds=POLICY.lexical_triggers,
        deadlines=DeadlinesConfig(chat_s=chat_s),
    )
    assert made is not None
    return made


def route(r: LLMRouter, query: str = FACTUAL) -> tuple[Classification, str, dict[str, Any]]:
    return asyncio.run(r(query, classify(query, POLICY)))


# --- the LLM's choice ---------------------------------------------------------------------


def test_llm_choice_replaces_the_route_and_spends_one_unit() -> None:
    model, quota = StructuredRouterModel(), ledger()
    cls, name, detail = route(router(model, quota=quota))
    assert name == "llm"
    assert cls.query_type == "exact_lexical_lookup" and not cls.is_broad
    assert cls.trigger_labels == ["identifier:gateway-server"]
    assert (
        cls.reason
        == "llm router: exact_lexical_lookup (confidence 0.90; deterministic: factual_lookup)"
    )
    assert detail == {
        "router": "llm",
        "mode": "on",
        "fallback_reason": None,
        "llm_calls": 1,
        "from_cache": False,
        "confidence": 0.9,
        "deterministic_route": "factual_lookup",
        "llm_route": "exact_lexical_lookup",
        "model": "fake-router",
    }
    assert model.calls == 1 and model.prompts == [FACTUAL]
    assert asyncio.run(quota.aremaining("chat_gen")) == 19
    json.dumps(detail)  # the manifest stores it as JSON


def test_llm_triggers_are_checked_against_the_query_and_the_policy() -> None:
    query = "Where does Kafka log the gateway-server 'connection refused' error"
    choice = RouteChoice(
        route="exact_lexical_lookup",
        is_broad=True,
        triggers=["Gateway-Server", "Kafka", "connection refused", "not in the query"],
        confidence=0.8,
    )
    kinds = [k for k in TriggerKind if k is not TriggerKind.PROPER_NOUN]
    r = LLMRouter(
        RouterConfig(llm_router="on"),
        chat_model=StructuredRouterModel(choice=choice),
        quota=ledger(),
        cache=MemoryCache(),
        trigger_kinds=kinds,
    )
    deterministic = classify(query, POLICY.model_copy(update={"lexical_triggers": kinds}))
    cls, name, detail = asyncio.run(r(query, deterministic))
    assert name == "llm"
    assert deterministic.trigger_labels == ["quoted_phrase:'connection refused'"]
    # deterministic triggers first; the LLM's in the query's spelling; covered ones not repeated
    assert cls.trigger_labels == [
        "quoted_phrase:'connection refused'",
        "identifier:gateway-server",
    ]
    assert detail["triggers_dropped"] == ["Kafka", "not in the query"]  # disabled kind, absent
    assert not cls.is_broad  # an exact lookup is never broad, whatever the LLM says


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("PROJ-42", TriggerKind.TICKET_ID),
        ("PEP 8", TriggerKind.POLICY_ID),
        ("HTTP", TriggerKind.ACRONYM),
        ("asyncio.gather", TriggerKind.IDENTIFIER),
        ("`max_chunks`", TriggerKind.QUOTED_PHRASE),
        ("connection refused", TriggerKind.QUOTED_PHRASE),
        ("Kafka", TriggerKind.PROPER_NOUN),
        ("gateway-server", TriggerKind.IDENTIFIER),
    ],
)
def test_trigger_kind_reads_the_deterministic_patterns_first(text: str, kind: TriggerKind) -> None:
    assert trigger_kind(text) is kind


def test_broad_synthesis_choice_keeps_breadth() -> None:
    choice = RouteChoice(route="synthesis", is_broad=True, triggers=[], confidence=0.7)
    cls, name, _ = route(router(StructuredRouterModel(choice=choice)))
    assert (name, cls.query_type, cls.is_broad, cls.triggers) == ("llm", "synthesis", True, [])


def test_no_retrieval_is_kept_without_a_call() -> None:
    model = StructuredRouterModel()
    cls, name, detail = route(router(model), "hi there")
    assert (cls.query_type, cls.no_retrieval_reason) == (None, "greeting")
    assert (name, detail["fallback_reason"], detail["llm_calls"]) == (
        "deterministic",
        "no-retrieval",
        0,
    )
    assert model.calls == 0


# --- fallbacks ----------------------------------------------------------------------------

FAILING_CHAT_S = 0.5  # long enough that a loaded machine still sees errors, not timeouts


@pytest.mark.parametrize(
    ("model", "quota", "reason", "calls"),
    [
        (None, ledger(), "no-llm", 0),
        (StructuredRouterModel(), ledger(0), "quota", 0),
        (StructuredRouterModel(), DownQuotaLedger({"chat_gen": 5}), "quota-store-unavailable", 0),
        (StructuredRouterModel(delay_s=30), ledger(), "timeout", 1),
        (StructuredRouterModel(error="provider exploded"), ledger(), "llm-error", 1),
        (StructuredRouterModel(parse_error=True), ledger(), "invalid-output", 1),
        (StructuredRouterModel(choice={"route": "everything"}), ledger(), "invalid-output", 1),
        (StructuredRouterModel(choice="exact_lexical_lookup"), ledger(), "invalid-output", 1),
        (StructuredRouterModel(choice=None), ledger(), "invalid-output", 1),
        (
            StructuredRouterModel(choice=LEXICAL_CHOICE.model_copy(update={"confidence": 0.3})),
            ledger(),
            "low-confidence",
            1,
        ),
    ],
)
def test_each_failure_falls_back_to_the_deterministic_route(
    model: StructuredRouterModel | None, quota: MemoryQuotaLedger, reason: str, calls: int
) -> None:
    deterministic = classify(FACTUAL, POLICY)
    r = router(model, quota=quota, chat_s=FAILING_CHAT_S)
    cls, name, detail = asyncio.run(r(FACTUAL, deterministic))
    assert cls is deterministic and name == "deterministic"
    assert detail["router"] == "deterministic" and detail["fallback_reason"] == reason
    assert detail["llm_calls"] == calls
    assert detail.keys() >= DETAIL_KEYS
    assert (model.calls if model is not None else 0) == calls
    json.dumps(detail)


@pytest.mark.parametrize(
    ("model", "error"),
    [
        (StructuredRouterModel(error="provider exploded"), "RuntimeError: provider exploded"),
        (StructuredRouterModel(delay_s=30), "DeadlineExceeded: no answer within 0.50s"),
        (
            StructuredRouterModel(parse_error=True),
            "OutputParserException: tool call arguments are not valid JSON",
        ),
        (
            StructuredRouterModel(choice="garbage"),
            "structured output is str, not a RouteChoice",
        ),
    ],
)
def test_failures_are_logged_and_recorded(
    model: StructuredRouterModel, error: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="ragtiller.routing.llm"):
        _, _, detail = route(router(model, chat_s=FAILING_CHAT_S))
    assert detail["error"] == error
    assert any("LLM router failed" in r.getMessage() for r in caplog.records)


def test_routing_is_bounded_by_the_chat_deadline_cut_to_the_turns() -> None:
    # one deadline for every chat-model call: step-back's and the router's
    assert router(None, chat_s=0.05).timeout_s == 0.05
    assert (
        LLMRouter(RouterConfig(), chat_model=None, quota=ledger(), cache=MemoryCache()).timeout_s
        == 10.0
    )
    for chat_s, turn_s in ((1.0, 15.0), (10.0, 3.0)):
        deadlines = DeadlinesConfig(chat_s=chat_s, turn_s=turn_s)
        policy = POLICY.model_copy(
            update={"router": RouterConfig(llm_router="on"), "deadlines": deadlines}
        )
        parts = build_components(
            policy, tiers=[StaticTier("lexical", [], needs_vector=False)], chat_model=None
        )
        assert parts.llm_router is not None and parts.llm_router.timeout_s == min(chat_s, turn_s)


def test_low_confidence_records_the_confidence_and_threshold() -> None:
    model = StructuredRouterModel(choice=LEXICAL_CHOICE.model_copy(update={"confidence": 0.75}))
    _, name, detail = route(router(model, llm_min_confidence=0.8))
    assert (name, detail["confidence"], detail["llm_route"]) == (
        "deterministic",
        0.75,
        "exact_lexical_lookup",
    )
    assert detail["note"] == "confidence 0.75 < llm_min_confidence 0.80"


# --- quota and cache ----------------------------------------------------------------------


def test_second_identical_query_is_served_from_cache() -> None:
    model, quota, cache = StructuredRouterModel(), ledger(), MemoryCache()
    r = router(model, quota=quota, cache=cache)
    first = route(r)
    second = route(r)
    assert (first[1], first[2]["from_cache"], first[2]["llm_calls"]) == ("llm", False, 1)
    assert (second[1], second[2]["from_cache"], second[2]["llm_calls"]) == ("llm", True, 0)
    assert second[0].trigger_labels == ["identifier:gateway-server"]
    assert model.calls == 1 and asyncio.run(quota.aremaining("chat_gen")) == 19


def test_the_cache_is_kept_per_tenant_and_on_the_exact_text() -> None:
    """The model read one tenant's text as written: another tenant, or another casing or
    spacing of the same question, is asked afresh."""
    model, cache = StructuredRouterModel(), MemoryCache()
    r = router(model, cache=cache)
    recased = FACTUAL.upper()
    asked = [(FACTUAL, "acme"), (FACTUAL, "globex"), (recased, "acme"), (f" {FACTUAL}", "acme")]
    for query, tenant in asked:
        _, _, detail = asyncio.run(r(query, classify(query, POLICY), tenant))
        assert detail["from_cache"] is False, (query, tenant)
    _, _, again = asyncio.run(r(FACTUAL, classify(FACTUAL, POLICY), "acme"))
    assert again["from_cache"] is True and model.calls == len(asked)


def test_low_confidence_answer_is_cached_too() -> None:
    model = StructuredRouterModel(choice=LEXICAL_CHOICE.model_copy(update={"confidence": 0.2}))
    r = router(model)
    route(r)
    _, name, detail = route(r)
    assert (name, detail["fallback_reason"], detail["from_cache"], detail["llm_calls"]) == (
        "deterministic",
        "low-confidence",
        True,
        0,
    )
    assert model.calls == 1


def test_a_failed_call_is_not_cached_and_never_retried_within_a_call() -> None:
    model, quota = StructuredRouterModel(choice={"route": "nope"}), ledger()
    r = router(model, quota=quota)
    for turn in (1, 2):
        _, _, detail = route(r)
        assert (detail["fallback_reason"], detail["llm_calls"]) == ("invalid-output", 1)
        assert model.calls == turn  # one call per turn: no retry, and the failure is not cached
    assert asyncio.run(quota.aremaining("chat_gen")) == 18  # a failed call is not refunded


def test_a_corrupt_cache_entry_is_a_miss_and_is_replaced() -> None:
    model, cache = StructuredRouterModel(), MemoryCache()
    r = router(model, cache=cache)
    route(r)
    key = router_key("fake-router", FACTUAL)
    assert asyncio.run(cache.aget(key)) == LEXICAL_CHOICE.model_dump(mode="json")
    asyncio.run(cache.aset(key, {"route": "synthesis"}, ttl_s=60))
    _, name, detail = route(r)
    assert (name, detail["fallback_reason"], detail["from_cache"]) == ("llm", None, False)
    assert model.calls == 2
    assert asyncio.run(cache.aget(key)) == LEXICAL_CHOICE.model_dump(mode="json")


async def test_concurrent_identical_queries_cost_one_call() -> None:
    model, quota = StructuredRouterModel(delay_s=0.05), ledger()
    r = router(model, quota=quota)
    deterministic = classify(FACTUAL, POLICY)
    outs = await asyncio.gather(*(r(FACTUAL, deterministic) for _ in range(20)))
    assert model.calls == 1 and await quota.aremaining("chat_gen") == 19
    assert {name for _, name, _ in outs} == {"llm"}
    assert sum(detail["llm_calls"] for _, _, detail in outs) == 1
    assert sum(not detail["from_cache"] for _, _, detail in outs) == 1


def test_quota_is_shared_with_step_back() -> None:
    quota = ledger(1)
    model = StructuredRouterModel()
    route(router(model, quota=quota))
    _, name, detail = route(router(model, quota=quota), "which port does the proxy-server use")
    assert (name, detail["fallback_reason"]) == ("deterministic", "quota")
    assert asyncio.run(quota.aremaining("chat_gen")) == 0 and model.calls == 1


# --- configuration ------------------------------------------------------------------------


def test_off_means_no_router() -> None:
    made = make_llm_router(
        RouterConfig(llm_router="off"),
        chat_model=StructuredRouterModel(),
        quota=ledger(),
        cache=MemoryCache(),
    )
    assert made is None


def test_on_without_a_model_still_exists_and_says_no_llm() -> None:
    r = router(None)
    assert not r.enabled
    assert route(r)[2]["fallback_reason"] == "no-llm"


def test_model_without_structured_output_is_a_configuration_error() -> None:
    model = GenericFakeChatModel(messages=iter([]))
    with pytest.raises(
        ConfigurationError, match="GenericFakeChatModel does not support with_structured_output"
    ):
        router(model)


def test_ledger_without_chat_budget_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="the quota ledger has no 'chat_gen' limit"):
        router(StructuredRouterModel(), quota=MemoryQuotaLedger({"rerank_calls": 1}))


# --- the eval gate ------------------------------------------------------------------------

TINY = Path(__file__).parent / "data" / "tiny_beir"
LABELLED = load_beir(TINY, slices=TINY / "slices.tsv")
# Slices: q1, q2 lexical; q3, q4 synthesis (q4 has no relevant doc); q5 factual.
BEST = {"q1": ["d1", "d2"], "q2": ["d3"], "q3": ["d5", "d4"], "q4": [], "q5": ["d7"]}
NO_LEXICAL = {**BEST, "q1": [], "q2": []}


def eval_run(rankings: dict[str, list[str]], policy: str) -> EvalRun:
    results = {
        qid: QueryResult(
            qid,
            tuple(ranking),
            RunManifest(
                run_id=qid,
                created_at="2026-01-01T00:00:00Z",
                policy_id=policy,
                policy_version="1",
                query_type="factual_lookup",
                latency_ms={"total": 10.0},
            ),
        )
        for qid, ranking in rankings.items()
    }
    return EvalRun(policy, "1", LABELLED.sha256, results)


def promote_artifact(
    tmp_path: Path,
    candidate: dict[str, list[str]],
    baseline: dict[str, list[str]],
    required: list[str],
) -> Path:
    """A real `ragtiller promote` artifact: LLM-router candidate vs deterministic baseline."""
    base_policy: RetrievalPolicy = POLICY
    cand_policy = POLICY.model_copy(
        update={
            "policy_id": "llm-router-candidate",
            "router": RouterConfig(llm_router="on"),
            "promotion": PromotionConfig(required_slices=required),
        }
    )
    comparison = compare_runs(
        eval_run(candidate, "llm-router-candidate"),
        eval_run(baseline, POLICY.policy_id),
        LABELLED,
        n_resamples=200,
    )
    decision = decide(cand_policy.promotion, comparison)
    path = tmp_path / "decisions" / "llm-router.json"
    write_decision(
        decision_artifact(cand_policy, base_policy, LABELLED, comparison, decision), path
    )
    return path


def gated(artifact: Path | str | None, model: StructuredRouterModel) -> LLMRouter:
    config = RouterConfig(
        llm_router="evaluated_optional",
        llm_eval_artifact=None if artifact is None else str(artifact),
    )
    made = make_llm_router(config, chat_model=model, quota=ledger(), cache=MemoryCache())
    assert made is not None
    return made


def test_promote_artifact_with_lift_enables_the_router(tmp_path: Path) -> None:
    path = promote_artifact(tmp_path, BEST, NO_LEXICAL, ["lexical"])
    assert json.loads(path.read_text())["decision"] == "promote"
    model = StructuredRouterModel()
    r = gated(path, model)
    assert r.enabled
    _, name, detail = route(r)
    assert (name, detail["mode"], model.calls) == ("llm", "evaluated_optional", 1)
    assert detail["eval"] == {
        "artifact": str(path),
        "reason": None,
        "note": f"promoted by {str(path)!r}: candidate llm-router-candidate@{POLICY.version} beat "
        f"baseline default-retrieval-policy@{POLICY.version} on lexical",
    }


def test_rejected_artifact_keeps_the_router_off(tmp_path: Path) -> None:
    path = promote_artifact(tmp_path, NO_LEXICAL, BEST, ["lexical"])
    assert json.loads(path.read_text())["decision"] == "reject"
    model = StructuredRouterModel()
    r = gated(path, model)
    _, name, detail = route(r)
    assert (name, detail["fallback_reason"], detail["llm_calls"]) == (
        "deterministic",
        "eval-rejected",
        0,
    )
    assert (
        detail["note"]
        == f"router.llm_eval_artifact {str(path)!r} has decision 'reject', not 'promote'"
    )
    assert not r.enabled and model.calls == 0


def test_promote_without_lift_on_a_required_slice_is_no_evidence(tmp_path: Path) -> None:
    # min_ndcg_lift 0 lets a tie promote; "beat the deterministic router" needs a lift > 0
    path = promote_artifact(tmp_path, BEST, NO_LEXICAL, ["lexical", "factual"])
    assert json.loads(path.read_text())["decision"] == "promote"
    evidence = read_eval_evidence(str(path), setting="router.llm_eval_artifact")
    assert evidence.reason == "no-eval-evidence"
    assert "shows no NDCG@10 lift over the baseline in slice 'factual'" in evidence.note


def test_without_required_slices_the_overall_lift_decides(tmp_path: Path) -> None:
    assert read_eval_evidence(
        str(promote_artifact(tmp_path, BEST, NO_LEXICAL, [])), setting="s"
    ).allowed
    tie = promote_artifact(tmp_path, BEST, BEST, [])
    assert read_eval_evidence(str(tie), setting="s").reason == "no-eval-evidence"


@pytest.mark.parametrize(
    ("content", "reason", "note"),
    [
        (None, "eval-artifact-unreadable", "cannot read router.llm_eval_artifact"),
        ("{not json", "eval-artifact-unreadable", "JSONDecodeError"),
        ('{"decision": "promote"}', "eval-artifact-unreadable", "is not a `ragtiller promote`"),
        (
            json.dumps({"kind": ARTIFACT_KIND, "schema_version": 1, "decision": "promote"}),
            "eval-artifact-unreadable",
            "has no 'lifts' or 'rules' section",
        ),
    ],
)
def test_bad_artifact_files_keep_the_router_off(
    tmp_path: Path, content: str | None, reason: str, note: str
) -> None:
    path = tmp_path / "decision.json"
    if content is not None:
        path.write_text(content)
    model = StructuredRouterModel()
    _, name, detail = route(gated(path, model))
    assert (name, detail["fallback_reason"]) == ("deterministic", reason)
    assert note in detail["note"]
    assert model.calls == 0


def test_no_artifact_configured_is_no_evidence_and_needs_no_capable_model() -> None:
    # a model without structured output is fine while the gate keeps the router off
    r = gated(None, GenericFakeChatModel(messages=iter([])))  # type: ignore[arg-type]
    _, name, detail = route(r)
    assert (name, detail["fallback_reason"]) == ("deterministic", "no-eval-evidence")
    assert detail["note"].startswith("router.llm_eval_artifact is not set")


# --- through the graph --------------------------------------------------------------------


def tiers() -> list[StaticTier]:
    return [
        StaticTier("dense", [hit("dense", f"c{i}", 0.9 - i / 10) for i in range(5)]),
        StaticTier(
            "lexical",
            [
                hit("lexical", "c7", 9.0, text="gateway-server listens on port 8443 by default"),
                hit("lexical", "c8", 2.0),
            ],
            needs_vector=False,
        ),
    ]


def run_turn(**kwargs: Any) -> tuple[RunManifest, list[dict[str, Any]]]:
    g = build_graph(
        POLICY,
        require_tenant=False,
        tiers=tiers(),
        embedder=DeterministicFakeEmbedding(size=8),
        **kwargs,
    )
    events: list[dict[str, Any]] = []
    out: dict[str, Any] = {}
    for mode, chunk in g.stream({"query": FACTUAL}, stream_mode=["custom", "values"]):
        if mode == "custom":
            events.append(chunk)
        else:
            out = chunk
    return out["manifest"], [e for e in events if e["status"] != "active"]


def stage(events: list[dict[str, Any]], step: str) -> list[dict[str, Any]]:
    return [e for e in events if e["step"] == step]


def test_llm_route_changes_the_edges_of_a_turn() -> None:
    quota, cache, model = ledger(), MemoryCache(), StructuredRouterModel()
    llm_router = make_llm_router(
        RouterConfig(llm_router="on"), chat_model=model, quota=quota, cache=cache
    )
    baseline, base_events = run_turn(quota=ledger(), cache=MemoryCache())
    manifest, events = run_turn(quota=quota, cache=cache, llm_router=llm_router)

    # deterministic: a factual lookup, lexical tier off, rerank disabled by the route
    assert (baseline.router, baseline.query_type) == ("deterministic", "factual_lookup")
    (lexical,) = [e for e in stage(base_events, "tier_search") if e["detail"]["tier"] == "lexical"]
    assert (lexical["status"], lexical["detail"]["reason"]) == ("skipped", "hybrid-off")
    assert stage(base_events, "rerank")[0]["detail"]["reason"] == "route-floor"

    # LLM: an exact lookup of its trigger; the lexical tier runs and its exact match skips rerank
    assert (manifest.router, manifest.query_type) == ("llm", "exact_lexical_lookup")
    assert manifest.triggers == ["identifier:gateway-server"]
    assert manifest.router_detail["llm_calls"] == 1
    assert manifest.llm_calls == 1
    assert manifest.router_detail["fallback_reason"] is None
    gate = stage(events, "gate")[0]
    assert (gate["detail"]["router"], gate["detail"]["query_type"]) == (
        "llm",
        "exact_lexical_lookup",
    )
    ran = {e["detail"]["tier"] for e in stage(events, "tier_search") if e["status"] == "done"}
    assert ran == {"dense", "lexical"}
    rerank = stage(events, "rerank")[0]
    assert (rerank["status"], rerank["detail"]["reason"]) == ("done", "exact-match")
    assert manifest.hybrid is not None and manifest.hybrid.enabled
    assert "c7" in {c.id for c in manifest.reranked}  # the lexical tier's exact match answers
    assert "c7" not in {c.id for c in baseline.reranked}
    assert model.calls == 1 and asyncio.run(quota.aremaining("chat_gen")) == 19
    assert manifest.quota_remaining["chat_gen"] == 19  # the router's call counted once


def test_gated_off_router_serves_the_deterministic_route_and_says_why() -> None:
    quota, cache, model = ledger(), MemoryCache(), StructuredRouterModel()
    llm_router = make_llm_router(
        RouterConfig(llm_router="evaluated_optional"),
        chat_model=model,
        quota=quota,
        cache=cache,
    )
    manifest, _ = run_turn(quota=quota, cache=cache, llm_router=llm_router)
    assert (manifest.router, manifest.query_type) == ("deterministic", "factual_lookup")
    assert manifest.router_detail["fallback_reason"] == "no-eval-evidence"
    assert manifest.router_detail["llm_calls"] == 0
    assert model.calls == 0 and asyncio.run(quota.aremaining("chat_gen")) == 20


def test_router_fallback_for_quota_is_a_degradation_label() -> None:
    quota = MemoryQuotaLedger({"chat_gen": 0, "rerank_calls": 1})
    config = RouterConfig(llm_router="on")
    router = make_llm_router(
        config, chat_model=StructuredRouterModel(), quota=quota, cache=MemoryCache()
    )
    manifest, _ = run_turn(quota=quota, cache=MemoryCache(), llm_router=router)
    assert manifest.router == "deterministic"
    assert manifest.router_detail["fallback_reason"] == "quota"
    assert "llm router skipped: quota" in manifest.degraded
