"""Run-context dispatch: each run uses nodes built for its own policy, cached per policy key (the
default context pays one dictionary lookup per node); stage events reach LangChain callbacks."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from langchain_core.callbacks import BaseCallbackManager, adispatch_custom_event
from langgraph.config import get_config

from ragtiller.core.tiers import CHAT_RESOURCE, RERANK_RESOURCE
from ragtiller.errors import ConfigurationError, InputError
from ragtiller.nodes.components import Components, NodeFn
from ragtiller.nodes.run_input import current_context
from ragtiller.nodes.scope import check_resumed_scope, turn_context, turn_scope
from ragtiller.nodes.stage import EVENT_TYPE, final_event
from ragtiller.policies.run_context import EMPTY, RunContext, pinned, run_policy
from ragtiller.policies.schema import RetrievalPolicy
from ragtiller.rerankers.ceiling import CeilingReranker
from ragtiller.stores import spend_caps

Caps = tuple[dict[str, int], dict[str, int]]
"""A policy's daily limits: shared, and each tenant's own (see :func:`spend_caps`)."""

NodeMaker = Callable[[Components], NodeFn]
MAX_VARIANTS = 32
"""Distinct run-context policy keys kept per graph; older variants are rebuilt when asked."""


def check_route_namespaces(
    policy: RetrievalPolicy, known: Sequence[str] | None, *, show_known: bool = True
) -> None:
    """Fail when a route names a namespace the index does not hold. ``show_known`` lists the
    index's namespaces: ``build_graph``'s operator reads them, a run's caller must not (they
    may be other tenants')."""
    if known is None:
        return
    bad = [
        f"{route}: {namespace!r}"
        for route, config in policy.routes.items()
        for namespace in config.namespaces
        if namespace not in known
    ]
    if bad:
        holds = f"; the index holds: {', '.join(known)}" if show_known else ""
        raise ConfigurationError(
            f"policy {policy.policy_id!r} routes name namespaces the index does not hold "
            f"({'; '.join(bad)}){holds}"
        )


FIXED_AT_BUILD = ("router", "lexical_triggers", "cache", "dense_backend", "lexical_backend")
"""Policy sections whose objects ``build_graph`` makes once (the LLM router, the backends; the
router and the ceiling keep their cache TTL)."""


def fixed_changes(base: RetrievalPolicy, run: RetrievalPolicy) -> list[str]:
    """The fields ``run`` changes that a run cannot: not the daily call limits, which cap a
    turn's spends by the run policy's (lower a limit, never raise it)."""
    changed = [name for name in FIXED_AT_BUILD if getattr(base, name) != getattr(run, name)]
    if base.quota.timezone != run.quota.timezone:
        changed.append("quota.timezone")
    changed.extend(
        f"reranker.{field}"
        for field in type(base.reranker).model_fields
        if field != "daily_calls" and getattr(base.reranker, field) != getattr(run.reranker, field)
    )
    return changed


def _query_options(policy: RetrievalPolicy) -> tuple[Any, ...]:
    return (policy.fusion, policy.feedback, policy.budgets.window_words)


def _listening(config: Mapping[str, Any]) -> bool:
    callbacks = config.get("callbacks")
    if isinstance(callbacks, BaseCallbackManager):
        handlers = callbacks.handlers
    elif isinstance(callbacks, list):
        handlers = callbacks
    else:
        return False
    return any(not getattr(h, "ignore_custom_event", False) for h in handlers)


async def announce(update: Mapping[str, Any]) -> None:
    records = update.get("stages") if isinstance(update, Mapping) else None
    if not records:
        return
    try:
        config = get_config()
    except RuntimeError:
        return
    if not _listening(config):
        return
    for record in records:
        await adispatch_custom_event(EVENT_TYPE, final_event(record), config=config)


class PerRunNodes:
    def __init__(
        self,
        deps: Components,
        makers: Mapping[str, NodeMaker],
        *,
        known_namespaces: Sequence[str] | None = None,
    ) -> None:
        self.deps = deps
        self.makers = dict(makers)
        self.known_namespaces = known_namespaces
        self._variants: dict[tuple[Any, ...], tuple[dict[str, NodeFn], Caps]] = {}
        self._lock = threading.Lock()
        check_route_namespaces(deps.policy, known_namespaces)

    def components(self, context: RunContext) -> Components:
        """The graph's components with the context's policy and rerank switch applied: every
        field the policy sets takes effect, or the run is refused."""
        if context.policy_key() == EMPTY.policy_key():
            return self.deps
        base = self.deps.policy
        policy = run_policy(base, context)
        if policy == base:  # e.g. a top_k within max_chunks
            return self.deps
        fixed = fixed_changes(base, policy)
        if fixed:
            raise InputError(
                f"run policy {policy.policy_id!r} changes fields fixed when the graph was built "
                f"({', '.join(fixed)}); build a graph with that policy instead "
                "(build_graph(policy=...)), or leave those fields as the graph's"
            )
        check_route_namespaces(policy, self.known_namespaces, show_known=False)
        tiers, reranker = self.deps.tiers, self.deps.reranker
        rebuilt = _query_options(policy) != _query_options(base)
        if rebuilt and self.deps.variant is not None:
            tiers, reranker = self.deps.variant(policy)
        if context.rerank == "on" and isinstance(reranker, CeilingReranker):
            reranker = reranker.floor  # "on" means the free floor, never the paid ceiling
        return dataclasses.replace(self.deps, policy=policy, tiers=tiers, reranker=reranker)

    def nodes(self, context: RunContext) -> tuple[dict[str, NodeFn], Caps]:
        """The nodes for ``context``'s policy key, built on first use, and the daily limits of
        that policy (shared, and per tenant), which cap every spend its nodes make
        (:func:`spend_caps`)."""
        key = context.policy_key()
        found = self._variants.get(key)
        if found is not None:
            return found
        deps = self.components(context)
        if deps is self.deps and key != EMPTY.policy_key():
            # nothing this run sets changes the policy (a top_k within max_chunks, say): the
            # graph's own nodes, not another copy of them per key
            variant = self.nodes(EMPTY)
        else:
            built = {name: make(deps) for name, make in self.makers.items()}
            quota = deps.policy.quota
            caps: Caps = (
                {
                    CHAT_RESOURCE: quota.chat_gen_per_day,
                    RERANK_RESOURCE: deps.policy.reranker.daily_calls,
                },
                {}
                if quota.chat_gen_per_tenant_per_day is None
                else {CHAT_RESOURCE: quota.chat_gen_per_tenant_per_day},
            )
            variant = built, caps
        with self._lock:
            if len(self._variants) >= MAX_VARIANTS:
                self._variants.pop(next(iter(self._variants)))
            return self._variants.setdefault(key, variant)

    def node(self, name: str) -> NodeFn:

        async def run(state: Any) -> dict[str, Any]:
            context = pinned(self.deps.pin, current_context())
            if name != "gate":  # a run resumed, or sent to a node, starts past the gate
                context = turn_context(state, context)
                check_resumed_scope(turn_scope(name, state), context)
            nodes, caps = self.nodes(context)
            with spend_caps(*caps):  # a run policy's lower daily limits hold in every spend
                update = await nodes[name](state)
            await announce(update)
            return update

        run.__name__ = name
        return run
