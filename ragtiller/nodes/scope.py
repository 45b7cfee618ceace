"""A turn's scope (its tenant, the namespaces it asked for, its metadata filter), its seal,
and the checks that keep a checkpointed thread inside one scope.

A thread keeps what its turns returned (``messages`` above all), so a turn of one scope on a
thread another scope started would be handed that scope's text. The gate therefore refuses a
turn whose scope differs from the thread's.

Whoever can run or edit a thread can also write any of its channels (``update_state``) and
send any node any input (``Command(goto=Send(...))``), so the scope a node acts on is sealed:
the gate decides it once and seals it for its thread (:mod:`ragtiller.core.seal`). The route,
every tier task and the thread's ``scope`` carry their seal; each node after the gate refuses
a scope whose seal does not verify, and searches exactly the scope it sealed. A run resumed
from a breakpoint does not pass the gate again: it is also refused when its context pins a
scope the paused turn's does not have (default deny). The errors name no scope, since either
may be another tenant's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from langgraph.config import get_config
from typing_extensions import TypedDict

from ragtiller.core.seal import seal, verifies
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


Kind = Literal["thread", "turn"]
"""What a seal is for: the scope a thread's turns asked for (its ``scope`` channel), or the
scope one turn searches (its route and tier tasks, namespaces resolved). The kind is sealed
too, so a thread's scope (namespaces None: the route's) never passes for a turn's."""

SENT_FROM_OUTSIDE = (
    "this turn's tenant, namespace or filter is not the one its gate decided (the thread's "
    "state was edited, or a task was sent from outside the turn); start a new turn"
)


EDITED_THREAD = (
    "this thread's tenant, namespace or filter was not written by one of its turns (its state "
    "was edited, or copied from another thread); use a new thread_id"
)


class SealedScope(Scope):
    """A thread's scope and its seal (HMAC-SHA256 of the scope, its kind and the thread id)."""

    seal: str


def sealed_thread(scope: Scope) -> SealedScope:
    """The scope a thread's turns ask for, sealed for this run's thread (the gate's to call)."""
    return SealedScope(**scope, seal=seal(_record(scope, "thread")))


def thread_id() -> str:
    """The run's ``thread_id`` ("" outside a threaded run): what a seal is bound to, so a scope
    sealed for one thread does not verify on another."""
    try:
        configurable = get_config().get("configurable") or {}
    except RuntimeError:  # a node function called directly, outside a run
        return ""
    return str(configurable.get("thread_id") or "")


def _record(scope: Scope, kind: Kind) -> dict[str, Any]:
    return {
        "kind": kind,
        "thread": thread_id(),
        "tenant": scope["tenant"],
        "namespaces": scope["namespaces"],
        "filter": scope["filter"],
    }


class TurnScope(TypedDict):
    """The scope one turn searches, sealed: what its route and each of its tier tasks carry."""

    tenant: str | None
    namespaces: list[str]
    filter: dict[str, Any] | None
    seal: str


def sealed_turn(
    tenant: str | None, namespaces: list[str], filter: dict[str, Any] | None
) -> TurnScope:
    """The scope a turn searches, sealed for this run's thread (the gate's to call)."""
    scope = Scope(tenant=tenant, namespaces=namespaces, filter=filter)
    return TurnScope(
        tenant=tenant, namespaces=namespaces, filter=filter, seal=seal(_record(scope, "turn"))
    )


def verified(holder: Any, kind: Kind, refusal: str = SENT_FROM_OUTSIDE) -> Scope:
    """The scope ``holder`` (a route, a tier task, a thread's ``scope``) carries, when its seal
    is the one the gate made for it on this thread.

    Raises:
        InputError: ``refusal``: the holder is not a sealed scope, or its seal does not verify.
    """
    try:
        scope = Scope(
            tenant=holder["tenant"], namespaces=holder["namespaces"], filter=holder["filter"]
        )
        given = holder["seal"]
    except (KeyError, TypeError, IndexError):
        raise InputError(refusal) from None
    if not verifies(_record(scope, kind), given):
        raise InputError(refusal)
    return scope


def check_thread_scope(previous: Any, current: Scope) -> None:
    """Refuse a turn whose scope differs from the one its thread was started with
    (``previous``: the thread's sealed ``scope``, None on a new thread).

    Raises:
        InputError: The thread's earlier turns had another tenant, namespace or filter, or
            its scope was not written by one of its turns.
    """
    if previous is not None and dict(verified(previous, "thread", EDITED_THREAD)) != dict(current):
        raise InputError(
            "this thread was started with another tenant, namespace or filter, and a turn "
            "may not change it (the thread keeps its earlier turns' answers): pass the same "
            "scope on every turn, or use a new thread_id"
        )


def turn_scope(node: str, state: Any) -> Scope:
    """The verified scope node ``node`` acts on: its own task's for ``tier_search``, else the
    route's.

    Raises:
        InputError: It is not the scope the gate sealed for this thread.
    """
    if node == "tier_search":
        return verified(state, "turn")
    return verified(state.get("route") if isinstance(state, Mapping) else None, "turn")


def check_tasks_scope(tasks: list[Any], route: Mapping[str, Any]) -> None:
    """Refuse tier tasks that do not carry the (verified) route's scope and seal: a node that
    reads them (fuse builds its vector reads from them) acts on the scope the turn searched.

    Raises:
        InputError: A task carries another scope or seal.
    """
    fields = ("tenant", "namespaces", "filter", "seal")
    for task in tasks:
        if not isinstance(task, Mapping) or any(task.get(f) != route[f] for f in fields):
            raise InputError(SENT_FROM_OUTSIDE)


def check_resumed_scope(scope: Scope, context: RunContext) -> None:
    """Refuse to go on when this run's context pins a scope other than the turn's ``scope``
    (a resume that passes another tenant's pins).

    A turn that searches no namespace (``[]``: a no-retrieval route) passes any pinned
    namespace: it searches nothing.

    Raises:
        InputError: The context's tenant, namespace or filter differs from the turn's.
    """
    namespaces = scope["namespaces"]
    differs = (
        (context.tenant is not None and context.tenant != scope["tenant"])
        or (context.filter is not None and context.filter != scope["filter"])
        or (
            context.namespace is not None
            and namespaces != []
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
    "EDITED_THREAD",
    "SENT_FROM_OUTSIDE",
    "Kind",
    "Scope",
    "SealedScope",
    "TurnScope",
    "asked_scope",
    "check_resumed_scope",
    "check_tasks_scope",
    "check_thread_scope",
    "sealed_thread",
    "sealed_turn",
    "thread_id",
    "turn_context",
    "turn_scope",
    "verified",
)
