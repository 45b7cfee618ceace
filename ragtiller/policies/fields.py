"""The policy's leaf fields as a table (path, when each applies, value, what it does), read from the
schema: ``ragtiller policy show --fields`` prints it, docs/policy.md holds the default's (a test
keeps the two equal)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel

from ragtiller.policies.schema import RetrievalPolicy


def _rows(model: BaseModel, prefix: str = "") -> Iterator[tuple[str, str, Any, str]]:
    """Every leaf of ``model`` in schema order: dotted path, ``applies`` tag, value, description."""
    for name, info in type(model).model_fields.items():
        value = getattr(model, name)
        if isinstance(value, BaseModel):
            yield from _rows(value, f"{prefix}{name}.")
        elif name == "routes" and isinstance(value, dict):
            for route, config in value.items():
                yield from _rows(config, f"{prefix}{name}.{route}.")
        else:
            extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
            dumped = model.model_dump(mode="json", include={name})[name]
            yield f"{prefix}{name}", str(extra.get("applies", "")), dumped, info.description or ""


def fields_table(policy: RetrievalPolicy) -> str:
    """The policy's leaf fields as a Markdown table."""
    lines = ["| field | applies | value | what it does |", "|---|---|---|---|"]
    for path, applies, value, description in _rows(policy):
        shown = json.dumps(value, ensure_ascii=False).replace("|", "\\|")
        lines.append(f"| `{path}` | {applies} | `{shown}` | {description} |")
    return "\n".join(lines) + "\n"
