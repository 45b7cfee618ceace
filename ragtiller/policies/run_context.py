"""Per-run settings (LangGraph's runtime ``context``, listed in Studio's configuration panel)
and the policy they make for one turn; the graph itself never changes."""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ragtiller.core.filters import SURROGATE, filter_problem, shown
from ragtiller.errors import InputError, RagtillerError
from ragtiller.policies.loader import load_allowed_policy, policy_dir
from ragtiller.policies.schema import RetrievalPolicy

OnOff = Literal["on", "off"]
Count = Annotated[int, Field(strict=True, gt=0, le=100)]  # "5", 5.0 and True are refused
RerankSwitch = Literal["on", "off", "ceiling"]  # on: the free floor only


def cached_policy(name: str) -> RetrievalPolicy:
    """The per-run policy ``name``, loaded once per process (the directory read on each call)."""
    return _cached_policy(name, policy_dir())


@lru_cache(maxsize=32)
def _cached_policy(name: str, directory: Path | None) -> RetrievalPolicy:
    return load_allowed_policy(name, directory)


RESERVED_KEYS = frozenset({"tenant", "namespace"})  # a filter may not name them: own fields
MAX_NAMESPACES = 64  # each is searched, checked and may be labelled
MAX_NAME_CHARS = 256  # a name is repeated in labels, the context and the manifest


def scope_problem(field: str, value: object) -> str | None:
    """What is wrong with a ``tenant`` or ``namespace`` value, or None; a blank one is refused,
    not read as "no filter": it must never widen a turn to every tenant's."""
    names = value if field == "namespace" and isinstance(value, list) else [value]
    if field == "namespace" and not names:
        return "must name at least one namespace, got an empty list; leave it out for the route's"
    if len(names) > MAX_NAMESPACES:
        return (
            f"names {len(names)} namespaces; at most {MAX_NAMESPACES} may be searched in one turn"
        )
    for name in names:
        if not isinstance(name, str):
            return f"must be a str{' or a list of str' if field == 'namespace' else ''}, got {type(name).__name__}"
        if not name.strip():
            return (
                f"must not be empty or blank, got {name!r}: it would filter nothing out; "
                f"name the {field}, or leave the key out"
            )
        if len(name) > MAX_NAME_CHARS:
            return f"is {len(name)} characters long; a name has at most {MAX_NAME_CHARS}"
        if SURROGATE.search(name):
            return "holds an undecodable character (a lone surrogate); pass valid text"
    return None


class RunContext(BaseModel):
    """Settings for one run (``context={...}``, or ``configurable["ragtiller"]``); every unset
    field keeps the graph's policy, and a bad value is an :class:`~ragtiller.errors.InputError`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    policy: str | None = Field(
        None,
        description="Name of an allowed policy: a shipped one (e.g. 'default') or one in the "
        "operator's RAGTILLER_POLICY_DIR; never a path.",
    )
    top_k: Count | None = Field(
        None,
        description="Documents returned, at most 100 (max_chunks rises to it unless the run "
        "sets max_chunks too).",
    )
    max_chunks: Count | None = Field(
        None, description="Most chunks any route may return; sizes the candidates."
    )
    namespace: str | list[str] | None = Field(
        None, description="Namespace(s) searched instead of the route's."
    )
    tenant: str | None = Field(
        None, description="Tenant id, used as a metadata filter on every tier."
    )
    filter: dict[str, Any] | None = Field(
        None,
        description="Metadata filter on every tier: key -> value (equality) or list of values "
        "(membership); a document without the key never matches. tenant and namespace have "
        "their own fields.",
    )
    step_back: OnOff | None = Field(None, description="Step-back on broad questions: on or off.")
    rerank: RerankSwitch | None = Field(
        None, description="off, on (free floor only) or ceiling (paid ceiling if quota is left)."
    )

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as e:
            raise InputError(_describe(e)) from e

    @field_validator("policy")
    @classmethod
    def _loadable(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                cached_policy(value)
            except RagtillerError as e:  # unknown name, bad operator file or directory
                raise ValueError(str(e)) from e
        return value

    @field_validator("filter", mode="before")
    @classmethod
    def _portable(cls, value: Any) -> Any:
        problem = None if value is None else filter_problem(value, reserved=RESERVED_KEYS)
        if problem is not None:
            raise ValueError(problem)
        return value

    @field_validator("tenant", "namespace")
    @classmethod
    def _names_one(cls, value: Any, info: Any) -> Any:
        problem = None if value is None else scope_problem(info.field_name, value)
        if problem is not None:
            raise ValueError(problem)
        return value

    def overrides(self) -> dict[str, Any]:
        """The fields this run sets, as recorded in the manifest."""
        return self.model_dump(exclude_none=True)

    def policy_key(self) -> tuple[Any, ...]:
        """What decides this run's policy (the graph caches one set of nodes per key)."""
        return (self.policy, self.max_chunks, self.top_k, self.step_back, self.rerank)


def _describe(error: ValidationError) -> str:
    fields = ", ".join(RunContext.model_fields)
    lines = ["invalid run context:"]
    for item in error.errors():
        path = ".".join(str(p) for p in item["loc"]) or "<root>"
        lines.append(f"  {path}: {item['msg']} (got {shown(item.get('input'))})")
    lines.append(f"  accepted fields: {fields}")
    return "\n".join(lines)


def run_policy(base: RetrievalPolicy, context: RunContext) -> RetrievalPolicy:
    """``base`` (or the policy the context names) with the context's switches applied."""
    policy = cached_policy(context.policy) if context.policy else base
    # k means k: a run asking for more documents than max_chunks gets them (and a pool sized
    # for them); only a run's own max_chunks caps its top_k
    chunks = context.max_chunks or max(policy.budgets.max_chunks, context.top_k or 0)
    if chunks != policy.budgets.max_chunks:
        budgets = policy.budgets.model_copy(update={"max_chunks": chunks})
        policy = policy.model_copy(update={"budgets": budgets})
    if context.step_back is not None:
        step_back = policy.step_back.model_copy(update={"enabled": context.step_back == "on"})
        policy = policy.model_copy(update={"step_back": step_back})
    if context.rerank is not None:
        routes = {
            name: route.model_copy(update={"rerank": context.rerank != "off"})
            for name, route in policy.routes.items()
        }
        policy = policy.model_copy(update={"routes": routes})
    return policy


EMPTY = RunContext()
CONFIG_KEY = "ragtiller"  # configurable[...] holds a run's settings where context cannot go


def context_from(value: Any, configurable: Mapping[str, Any] | None = None) -> RunContext:
    """LangGraph's ``context`` (when it is ours) with ``configurable["ragtiller"]``: both are
    read, so a tenant set in one holds when the caller passes the other, and a field they set
    differently is refused, not resolved (either may be what limits the caller's scope)."""
    own = value if isinstance(value, RunContext) else EMPTY
    pinned = _configured((configurable or {}).get(CONFIG_KEY))
    if pinned == EMPTY:
        return own
    if own == EMPTY:
        return pinned
    mine, theirs = own.overrides(), pinned.overrides()
    clash = sorted(key for key in mine.keys() & theirs.keys() if mine[key] != theirs[key])
    if clash:
        raise InputError(
            f"the run's context and configurable[{CONFIG_KEY!r}] set {', '.join(clash)} "
            "differently; set each field in one of them"
        )
    return RunContext(**{**theirs, **mine})


PINNED_MESSAGE = (
    "this graph pins {fields}: a run may not set {them} differently (a run's filter may only "
    "add keys the pinned one does not set); leave {them} out, or pass the pinned value"
)


def pinned(
    pin: RunContext | None, asked: RunContext, given: Mapping[str, Any] | None = None
) -> RunContext:
    """``asked`` under the graph's ``pin``: a run value (or the input's ``tenant`` and
    ``namespace`` in ``given``) that differs from a pinned one is refused, never taken; a run's
    ``filter`` may only add keys. The refusal names fields, never values (another tenant's)."""
    if pin is None:
        return asked
    fixed, mine = pin.overrides(), asked.overrides()
    clash = {key for key in fixed.keys() & mine.keys() if not _agrees(key, fixed[key], mine[key])}
    for key in ("tenant", "namespace"):
        value = (given or {}).get(key)
        if key in fixed and value is not None and not _agrees(key, fixed[key], value):
            clash.add(key)
    if clash:
        fields = ", ".join(sorted(clash))
        them = "it" if len(clash) == 1 else "them"
        raise InputError(PINNED_MESSAGE.format(fields=fields, them=them))
    if not mine:
        return pin
    if "filter" in fixed and "filter" in mine:
        fixed["filter"] = {**mine["filter"], **fixed["filter"]}
    return RunContext(**{**mine, **fixed})


def _agrees(key: str, pinned: Any, value: Any) -> bool:
    if key == "filter":
        return all(value[name] == pinned[name] for name in value.keys() & pinned.keys())
    if key == "namespace":
        return _names(value) == _names(pinned)
    return bool(value == pinned)


def _names(namespace: str | list[str]) -> list[str]:
    return [namespace] if isinstance(namespace, str) else list(namespace)


def _configured(ours: Any) -> RunContext:
    if ours is None:
        return EMPTY
    if isinstance(ours, RunContext):
        return ours
    if not isinstance(ours, Mapping):
        raise InputError(
            f"configurable[{CONFIG_KEY!r}] must be a dict of run-context fields, got "
            f"{type(ours).__name__}; accepted fields: {', '.join(RunContext.model_fields)}"
        )
    return RunContext(**ours) if ours else EMPTY
