"""Run-context dispatch: nodes built per run policy, cached per key; stage events to callbacks."""

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

Caps = tuple[dict[str, int], dict[str, int]]  # a policy's daily limits: shared, each tenant's

NodeMaker = Callable[[Components], NodeFn]
MAX_VARIANTS = 32  # run-context policy keys kept per graph; older variants are rebuilt


def daily_limits(policy: RetrievalPolicy) -> Caps:
    quota, tenant = policy.quota, policy.quota.chat_gen_per_tenant_per_day
    shared = {CHAT_RESOURCE: quota.chat_gen_per_day, RERANK_RESOURCE: policy.reranker.daily_calls}
    return shared, ({} if tenant is None else {CHAT_RESOURCE: tenant})


def check_route_namespaces(
    policy: RetrievalPolicy, known: Sequence[str] | None, *, show_known: bool = True
) -> None:
    """Only the operator sees the index's namespaces (``show_known``): they may be tenants'."""
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


# policy sections whose objects build_graph makes once (the router, the backends, cache TTLs)
FIXED_AT_BUILD = ("router", "lexical_triggers", "cache", "dense_backend", "lexical_backend")


def fixed_changes(base: RetrievalPolicy, run: RetrievalPolicy) -> list[str]:
    """The fields ``run`` changes that a run cannot (daily limits may change: they only cap)."""
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


async def announce(update: Mapping[str, Any]) -> None:
    records = update.get("stages") if isinstance(update, Mapping) else None
    try:
        config = get_config() if records else None
    except RuntimeError:
        return
    callbacks = config.get("callbacks") if config is not None else None
    if isinstance(callbacks, BaseCallbackManager):
        callbacks = callbacks.handlers
    if isinstance(callbacks, list) and any(
        not getattr(h, "ignore_custom_event", False) for h in callbacks
    ):
        for record in records or ():
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
        """The components with the context's policy and rerank switch: all apply, or refused."""
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
        """The nodes for ``context``'s policy key, built on first use, and its daily limits."""
        key = context.policy_key()
        found = self._variants.get(key)
        if found is not None:
            return found
        deps = self.components(context)
        if deps is self.deps and key != EMPTY.policy_key():
            # nothing this run sets changes the policy: the graph's own nodes, not a copy per key
            variant = self.nodes(EMPTY)
        else:
            built = {name: make(deps) for name, make in self.makers.items()}
            variant = built, daily_limits(deps.policy)
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
