"""A turn's scope (tenant, namespaces, metadata filter), its seal, and the checks that keep a
checkpointed thread inside one scope. Whoever can run or edit a thread can write any channel
(``update_state``) and send any node any input, so the gate seals the scope for its thread and
each later node refuses one whose seal does not verify. Errors name no scope: either may be
another tenant's."""

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
    tenant = context.tenant if context.tenant is not None else state.get("tenant")
    namespace = context.namespace if context.namespace is not None else state.get("namespace")
    return Scope(tenant=tenant, namespaces=_listed(namespace), filter=context.filter)


Kind = Literal["thread", "turn"]
"""What a seal is for: a thread's asked scope, or one turn's searched scope (namespaces
resolved); the kind is sealed too, so one never passes for the other."""

SENT_FROM_OUTSIDE = (
    "this turn's tenant, namespace or filter is not the one its gate decided (the thread's "
    "state was edited, or a task was sent from outside the turn); start a new turn"
)
EDITED_THREAD = (
    "this thread's tenant, namespace or filter was not written by one of its turns (its state "
    "was edited, or copied from another thread); use a new thread_id"
)


class SealedScope(Scope):
    """HMAC-SHA256 of the scope, its kind and the thread id."""

    seal: str


def sealed_thread(scope: Scope) -> SealedScope:
    return SealedScope(**scope, seal=seal(_record(scope, "thread")))


def thread_id() -> str:
    """The run's ``thread_id`` (""): a seal is bound to it, so it verifies on no other thread."""
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
    """The scope one turn searches, sealed: what its route and tier tasks carry."""

    tenant: str | None
    namespaces: list[str]
    filter: dict[str, Any] | None
    seal: str


def sealed_turn(
    tenant: str | None, namespaces: list[str], filter: dict[str, Any] | None
) -> TurnScope:
    scope = Scope(tenant=tenant, namespaces=namespaces, filter=filter)
    return TurnScope(
        tenant=tenant, namespaces=namespaces, filter=filter, seal=seal(_record(scope, "turn"))
    )


def verified(holder: Any, kind: Kind, refusal: str = SENT_FROM_OUTSIDE) -> Scope:
    """The scope ``holder`` (a route, a tier task, a thread's ``scope``) carries, when its seal
    is the one the gate made for it on this thread; else ``refusal``."""
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
    """Refuse a turn whose scope differs from its thread's sealed ``previous`` (None: new)."""
    if previous is not None and dict(verified(previous, "thread", EDITED_THREAD)) != dict(current):
        raise InputError(
            "this thread was started with another tenant, namespace or filter, and a turn "
            "may not change it (the thread keeps its earlier turns' answers): pass the same "
            "scope on every turn, or use a new thread_id"
        )


def turn_scope(node: str, state: Any) -> Scope:
    """The verified scope ``node`` acts on: its own task's for ``tier_search``, else the route's."""
    if node == "tier_search":
        return verified(state, "turn")
    return verified(state.get("route") if isinstance(state, Mapping) else None, "turn")


def check_tasks_scope(tasks: list[Any], route: Mapping[str, Any]) -> None:
    """Refuse tier tasks without the (verified) route's scope and seal: fuse builds its vector
    reads from them."""
    fields = ("tenant", "namespaces", "filter", "seal")
    for task in tasks:
        if not isinstance(task, Mapping) or any(task.get(f) != route[f] for f in fields):
            raise InputError(SENT_FROM_OUTSIDE)


def check_resumed_scope(scope: Scope, context: RunContext) -> None:
    """Refuse a run whose context pins another scope than the paused turn's (a resume with
    another tenant's pins); a turn searching no namespace passes any pinned one."""
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
    """The run context the gate saw (saved in ``turn["overrides"]`` and each tier task), so a
    resumed turn equals the run that paused; a resume with another context is refused."""
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
