"""Load a policy from YAML, with errors that name the file and the field path."""

from __future__ import annotations

import warnings
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from ragtiller.errors import PolicyError
from ragtiller.policies.schema import SCHEMA_VERSION, RetrievalPolicy

DEFAULT_POLICY = "default"
"""Name of the shipped policy used when none is given."""


def shipped_policies() -> list[str]:
    """Names of the policies shipped inside the package (``policies/shipped/*.yaml``)."""
    folder = resources.files("ragtiller.policies").joinpath("shipped")
    return sorted(
        p.name.removesuffix(".yaml") for p in folder.iterdir() if p.name.endswith(".yaml")
    )


def _format_errors(source: str, error: ValidationError) -> str:
    lines = [f"invalid retrieval policy {source}:"]
    for item in error.errors():
        path = ".".join(str(part) for part in item["loc"]) or "<root>"
        got = item.get("input")
        shown = "" if item["type"] == "missing" else f" (got {got!r:.80})"
        lines.append(f"  {path}: {item['msg']}{shown}")
    return "\n".join(lines)


def upgrade_v1(data: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """A schema-1 policy as schema 2, and the changes made (empty when it is already 2).

    Version 2 renames each route's ``fusion`` switch to ``parent_child`` (what it turns on),
    moves ``step_back.timeout_s`` to ``deadlines.step_back_s``, and drops three knobs that
    nothing read: ``default_route``, ``router.baseline`` and ``eval_slices``.
    """
    if data.get("schema_version") != 1:
        return data, []
    out, changes = {**data, "schema_version": SCHEMA_VERSION}, ["schema_version: 1 -> 2"]
    routes = out.get("routes")
    if isinstance(routes, dict):
        renamed = {}
        for name, route in routes.items():
            if isinstance(route, dict) and "fusion" in route:
                route = {("parent_child" if k == "fusion" else k): v for k, v in route.items()}
                changes.append(f"routes.{name}.fusion -> routes.{name}.parent_child")
            renamed[name] = route
        out["routes"] = renamed
    step_back = out.get("step_back")
    if isinstance(step_back, dict) and "timeout_s" in step_back:
        out["deadlines"] = {"step_back_s": step_back["timeout_s"], **(out.get("deadlines") or {})}
        out["step_back"] = {k: v for k, v in step_back.items() if k != "timeout_s"}
        changes.append("step_back.timeout_s -> deadlines.step_back_s")
    router = out.get("router")
    if isinstance(router, dict) and "baseline" in router:
        out["router"] = {k: v for k, v in router.items() if k != "baseline"}
        changes.append("router.baseline removed (deterministic is the only baseline)")
    for dead in ("default_route", "eval_slices"):
        if dead in out:
            del out[dead]
            changes.append(f"{dead} removed (nothing read it)")
    return out, changes


def _upgrade(data: dict[str, Any], source: str) -> dict[str, Any]:
    """Read a schema-1 file as schema 2, warning with the changes it needs."""
    upgraded, changes = upgrade_v1(data)
    if changes:
        warnings.warn(
            f"{source} is policy schema 1; read as schema 2 with these changes: "
            f"{'; '.join(changes)}. Write the file anew with `ragtiller policy migrate`.",
            DeprecationWarning,
            stacklevel=3,
        )
    return upgraded


def parse_policy(data: Any, *, source: str = "<policy>") -> RetrievalPolicy:
    """Validate already-loaded policy data.

    Raises:
        PolicyError: Naming ``source`` and each bad field path.
    """
    if not isinstance(data, dict):
        raise PolicyError(
            f"invalid retrieval policy {source}: expected a mapping at the top level, got {type(data).__name__}"
        )
    try:
        return RetrievalPolicy.model_validate(_upgrade(data, source))
    except ValidationError as e:
        raise PolicyError(_format_errors(source, e)) from e


def load_policy(path: str | Path | None = None) -> RetrievalPolicy:
    """Load and validate a retrieval policy.

    Args:
        path: A YAML file, or the name of a shipped policy (``default``, ...). None: the default.

    Returns:
        The validated, frozen policy.

    Raises:
        PolicyError: The file is missing, is not YAML, or does not match the schema; the message
            names the file and the field path.

    Example:
        >>> load_policy().policy_id
        'default-retrieval-policy'
    """
    name = DEFAULT_POLICY if path is None else str(path)
    if path is None or (name in shipped_policies() and not Path(name).exists()):
        text = (
            resources.files("ragtiller.policies")
            .joinpath("shipped", f"{name}.yaml")
            .read_text("utf-8")
        )
        source = f"<shipped policy {name!r}>"
    else:
        file = Path(path)
        source = str(file)
        try:
            text = file.read_text("utf-8")
        except FileNotFoundError as e:
            raise PolicyError(
                f"policy file {source} does not exist; shipped policies: {', '.join(shipped_policies())}"
            ) from e
        except (OSError, UnicodeDecodeError) as e:
            raise PolicyError(f"cannot read policy file {source}: {e}") from e
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as e:
        raise PolicyError(f"invalid retrieval policy {source}: not valid YAML: {e}") from e
    return parse_policy(data, source=source)
