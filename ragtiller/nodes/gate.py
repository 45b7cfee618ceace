"""Gate: check the input, apply the run context, route the query (no LLM by default), read the
quota once, and decide the step-back edge from the policy and that quota view."""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from typing import Any

from ragtiller.core.filters import SURROGATE
from ragtiller.core.tiers import CHAT_RESOURCE, RERANK_RESOURCE, STAGES, StageRecord
from ragtiller.core.turn import QuotaView, Route, StepBack
from ragtiller.errors import InputError
from ragtiller.nodes.components import Components, NodeFn
from ragtiller.nodes.run_input import (
    ACCEPTED_SHAPES,
    asked_by,
    current_context,
    query_of,
    unknown_namespace_labels,
)
from ragtiller.nodes.scope import asked_scope, check_thread_scope, sealed_thread, sealed_turn
from ragtiller.nodes.stage import Stage, quota_label, skipped
from ragtiller.nodes.state import RetrievalState
from ragtiller.nodes.step_back import step_back_key
from ragtiller.policies.decisions import (
    decide_hybrid,
    decide_parent_child,
    decide_rerank_setting,
    decide_step_back,
)
from ragtiller.policies.run_context import RunContext, pinned, scope_problem
from ragtiller.routing.rules import Classification, classify

AFTER_GATE = STAGES[1:-1]  # the stages a no-retrieval turn bypasses, announced by the gate
CACHE_ANSWERS = frozenset({"no-llm", "quota", "quota-store-unavailable"})
"""Step-back skip reasons that a cached generalization overrides (it costs no call)."""
NO_TENANT = (
    "this graph serves several tenants and the turn names none: pass input 'tenant' or the "
    "run context's tenant (ragtiller ask --tenant); an operator's graph over every tenant: "
    "build_graph(..., require_tenant=False)"
)


def _refuse_blank_names(state: RetrievalState) -> None:
    for field in ("tenant", "namespace"):
        value = state.get(field)
        problem = None if value is None else scope_problem(field, value)
        if problem is not None:
            raise InputError(f"input {field!r} {problem}: {value!r:.80}; pass {ACCEPTED_SHAPES}")


def encodable(text: str) -> str:
    """Lone surrogates (undecodable bytes from argv) as U+FFFD, which every store can take."""
    return SURROGATE.sub("\ufffd", text)


async def read_quota(deps: Components, tenant: str | None = None) -> QuotaView:
    """One read of the chat and rerank budgets, and of ``tenant``'s own chat budget under a
    per-tenant limit (a single round trip on Redis). The gate runs under its turn policy's
    daily limits (``spend_caps``), so a run policy with a lower limit than the ledger's sees
    what is left of its own limit today."""
    resources = [r for r in (CHAT_RESOURCE, RERANK_RESOURCE) if r in deps.quota.limits]
    snapshot = await deps.quota.asnapshot(resources, tenant=tenant)
    left = snapshot.remaining
    own = snapshot.tenant_remaining.get(CHAT_RESOURCE)
    chat = left.get(CHAT_RESOURCE, 0)
    return QuotaView(
        chat_left=chat if own is None else min(chat, own),
        rerank_left=left.get(RERANK_RESOURCE, 0),
        available=snapshot.available,
        tenant_chat_left=own,
    )


def _top_k(route_top_k: int, context: RunContext, max_chunks: int) -> tuple[int, list[str]]:
    asked = context.top_k or route_top_k
    if asked > max_chunks and context.top_k is not None:
        return max_chunks, [f"top_k {asked} capped to max_chunks {max_chunks}"]
    return min(asked, max_chunks), []


def make_gate(deps: Components, *, known_namespaces: Sequence[str] | None = None) -> NodeFn:
    """The gate; a turn asking for a namespace not in ``known_namespaces`` is labelled."""
    policy = deps.policy

    async def gate(state: RetrievalState) -> dict[str, Any]:
        started = time.perf_counter()
        raw = query_of(state)
        query = encodable(raw)
        context = pinned(deps.pin, current_context(), state)
        _refuse_blank_names(state)
        scope = asked_scope(state, context)
        if deps.require_tenant and scope["tenant"] is None:
            raise InputError(NO_TENANT)
        check_thread_scope(state.get("scope"), scope)
        overrides = context.overrides()
        stage = Stage("gate")
        max_chars = policy.budgets.max_query_chars
        truncated = len(query) > max_chars
        embed_text = query[:max_chars]

        cls: Classification = classify(embed_text, policy)
        router_name, router_detail = "deterministic", {}
        if deps.llm_router is not None and cls.query_type is not None:
            cls, router_name, router_detail = await deps.llm_router(
                embed_text, cls, scope["tenant"]
            )
        quota = await read_quota(deps, scope["tenant"])

        step_back = StepBack(
            status="skipped", reason=None, original=query, generalized=None, from_cache=False
        )
        labels: list[str] = []
        if context.rerank == "ceiling" and not deps.has_ceiling:
            labels.append("rerank ceiling requested but none is configured: floor only")
        fallback = router_detail.get("fallback_reason")
        if fallback is not None:
            spent = quota_label(fallback, router_detail.get("quota_budget"))
            labels.append(f"llm router skipped: {spent}")
        if query != raw:
            labels.append("query held undecodable characters, replaced by U+FFFD")
        if truncated:
            labels.append(f"query truncated to {max_chars} characters for embedding")
        if not quota["available"]:
            labels.append("quota-store-unavailable: no paid call this turn (quotas fail closed)")
        records: list[StageRecord] = []
        if cls.query_type is None:
            reason = cls.no_retrieval_reason or "no-retrieval"
            route = Route(
                query_type="no_retrieval",
                no_retrieval_reason=reason,
                is_broad=False,
                triggers=[],
                **sealed_turn(scope["tenant"], [], context.filter),
                top_k=0,
                truncated=truncated,
                hybrid=None,
                parent_child=None,
                rerank=None,
                router="llm" if router_name == "llm" else "deterministic",
                router_detail=router_detail,
            )
            records.append(
                stage.done(
                    reason,
                    labels=labels,
                    query_type="no_retrieval",
                    router=router_name,
                    overrides=overrides,
                )
            )
            records.extend(skipped(step, reason) for step in AFTER_GATE)
            step_back["reason"] = reason
        else:
            config = policy.routes[cls.query_type]
            namespaces = scope["namespaces"] or config.namespaces
            labels.extend(unknown_namespace_labels(namespaces, known_namespaces, scope["tenant"]))
            top_k, capped = _top_k(config.top_k, context, policy.budgets.max_chunks)
            labels.extend(capped)
            route = Route(
                query_type=cls.query_type,
                no_retrieval_reason=None,
                is_broad=cls.is_broad,
                triggers=cls.trigger_labels,
                **sealed_turn(scope["tenant"], namespaces, context.filter),
                top_k=top_k,
                truncated=truncated,
                hybrid=decide_hybrid(config, cls.trigger_labels),
                parent_child=decide_parent_child(
                    config, is_broad=cls.is_broad, query_type=cls.query_type
                ),
                rerank=decide_rerank_setting(config),
                router="llm" if router_name == "llm" else "deterministic",
                router_detail=router_detail,
            )
            records.append(
                stage.done(
                    cls.reason,
                    labels=labels,
                    query_type=cls.query_type,
                    is_broad=cls.is_broad,
                    triggers=route["triggers"],
                    router=router_name,
                    router_fallback=fallback,
                    llm_calls=int(router_detail.get("llm_calls", 0)),
                    namespaces=route["namespaces"],
                    quota=quota,
                    overrides=overrides,
                )
            )
            skip = decide_step_back(
                policy, is_broad=cls.is_broad, has_model=deps.chat_model is not None, quota=quota
            )
            if (
                skip in CACHE_ANSWERS
                and await deps.cache.aget(step_back_key(query, route["tenant"])) is not None
            ):
                skip = None
            if skip is None:
                step_back["status"] = "active"
            else:
                step_back["reason"] = skip
                own = quota.get("tenant_chat_left")
                out = {"quota_budget": "tenant"} if skip == "quota" and own == 0 else {}
                records.append(skipped("step_back", skip, llm_calls=0, **out))

        return {
            **({"query": query} if state.get("query") is not None else {}),
            "turn": {
                "run_id": uuid.uuid4().hex,
                "started_at": started,
                "quota": quota,
                "overrides": overrides,
                "asked_by": asked_by(state),
            },
            "route": route,
            "scope": sealed_thread(scope),
            "embed_query": embed_text,
            "rerank_query": query,
            "step_back": step_back,
            "tier_tasks": [],
            "tier_hits": None,
            "candidates": [],
            "rerank": None,
            "ranked": [],
            "rerank_outcome": None,
            "stages": records,
            # a thread's previous answer is not this turn's, even while this one is paused
            "documents": [],
            "context": "",
            "manifest": None,
        }

    return gate
