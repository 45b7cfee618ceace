"""Load a policy from YAML, with errors that name the file and the field path."""

from __future__ import annotations

import warnings
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from ragtiller.errors import PolicyError
from ragtiller.policies.schema import RetrievalPolicy

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


def _upgrade(data: dict[str, Any], source: str) -> dict[str, Any]:
    """Move renamed keys to their new place, with a warning that names the change."""
    step_back = data.get("step_back")
    if isinstance(step_back, dict) and "timeout_s" in step_back:
        warnings.warn(
            f"{source}: step_back.timeout_s is now deadlines.step_back_s; update the file",
            DeprecationWarning,
            stacklevel=3,
        )
        deadlines = dict(data.get("deadlines") or {})
        deadlines.setdefault("step_back_s", step_back["timeout_s"])
        rest = {k: v for k, v in step_back.items() if k != "timeout_s"}
        return {**data, "step_back": rest, "deadlines": deadlines}
    return data


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
