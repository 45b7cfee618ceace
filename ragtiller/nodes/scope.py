"""A turn's scope (its tenant, the namespaces it asked for, its metadata filter), and the two
checks that keep a checkpointed thread inside one scope.

A thread keeps what its turns returned (``messages`` above all), so a turn of one scope on a
thread another scope started would be handed that scope's text. The gate therefore refuses a
turn whose scope differs from the thread's. A run resumed from a breakpoint does not pass the
gate again: every later node refuses to go on when the resuming run's context pins a scope the
paused turn's route does not have (default deny). The error names neither scope, since either
may be another tenant's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from typing_extensions import TypedDict

from ragtiller.core.filters import TENANT_KEY
from ragtiller.errors import InputError
from ragtiller.policies.run_context import RunContext


class Scope(TypedDict):
    """What a turn asked to be limited to; None: the route's namespaces, no tenant, no filter."""

    tenant: str | None
    namespaces: list[str] | None
    filter: dict[str, Any] | None


def asked_scope(state: Mapping[str, Any], context: RunContext) -> Scope:
    """The scope a turn asks for: each field from the run context, else from the input."""
    tenant = context.tenant if context.tenant is not None else state.get("tenant")
    namespace = context.namespace if context.namespace is not None else state.get("namespace")
    return Scope(tenant=tenant, namespaces=_listed(namespace), filter=context.filter)


def check_thread_scope(previous: Scope | None, current: Scope) -> None:
    """Refuse a turn whose scope differs from the one its thread was started with.

    Raises:
        InputError: The thread's earlier turns had another tenant, namespace or filter.
    """
    if previous is not None and dict(previous) != dict(current):
        raise InputError(
            "this thread was started with another tenant, namespace or filter, and a turn "
            "may not change it (the thread keeps its earlier turns' answers): pass the same "
            "scope on every turn, or use a new thread_id"
        )


def check_resumed_scope(state: Mapping[str, Any], context: RunContext) -> None:
    """Refuse to go on when this run's context pins a scope the paused turn does not have.

    ``state`` is the node's input: the graph state, or a tier branch's ``TierTask``.

    Raises:
        InputError: The context's tenant, namespace or filter differs from the turn's.
    """
    if context.tenant is None and context.namespace is None and context.filter is None:
        return
    if "tier" in state:  # a tier branch: its filter holds the tenant's
        task_filter = dict(state.get("filter") or {})
        tenant = task_filter.pop(TENANT_KEY, None)
        scope = (tenant, state.get("namespaces"), task_filter or None)
    else:
        route = state.get("route")
        if route is None:
            return
        namespaces = route["namespaces"] if route["query_type"] != "no_retrieval" else None
        scope = (route["tenant"], namespaces, route.get("filter"))
    tenant, namespaces, run_filter = scope
    differs = (
        (context.tenant is not None and context.tenant != tenant)
        or (context.filter is not None and context.filter != run_filter)
        or (
            context.namespace is not None
            and namespaces is not None
            and _listed(context.namespace) != namespaces
        )
    )
    if differs:
        raise InputError(
            "this run's tenant, namespace or filter differs from the paused turn's; resume a "
            "turn with the scope it was started with, or start a new turn"
        )


def turn_context(state: Mapping[str, Any], current: RunContext) -> RunContext:
    """The run context a node after the gate applies: the one the gate saw.

    A run resumed from a breakpoint carries only the context its caller passed again, often
    none; the nodes still apply the paused turn's (saved in ``turn["overrides"]``, and in each
    tier branch's task), so a resumed turn equals the run that paused. A resume that passes
    another context is refused rather than half applied.

    Raises:
        InputError: ``current`` sets fields, and not the paused turn's.
    """
    turn = state.get("turn")
    saved = turn.get("overrides") if isinstance(turn, Mapping) else state.get("overrides")
    mine = current.overrides()
    if saved is None or mine == saved:
        return current
    if not mine:
        return RunContext(**saved)
    fields = sorted(key for key in {*saved, *mine} if saved.get(key) != mine.get(key))
    raise InputError(
        f"this run's context differs from the paused turn's ({', '.join(fields)}); resume with "
        "no context or the same one, or start a new turn"
    )


def _listed(namespace: str | list[str] | None) -> list[str] | None:
    if namespace is None:
        return None
    return [namespace] if isinstance(namespace, str) else list(namespace)


__all__ = (
    "Scope",
    "asked_scope",
    "check_resumed_scope",
    "check_thread_scope",
    "turn_context",
)
