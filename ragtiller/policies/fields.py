"""The policy's leaf fields as rows: path, when each applies, value, what it does.

``ragtiller policy show --fields`` prints them, and ``docs/policy.md`` holds the default's
table (a test keeps the two equal), so the list of knobs is read from the schema, never
copied by hand.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from ragtiller.policies.schema import RetrievalPolicy


@dataclass(frozen=True)
class FieldRow:
    """One leaf field of a policy.

    Attributes:
        path: Dotted, e.g. ``fusion.method`` or ``routes.synthesis.top_k``.
        applies: ``build``, ``turn`` or ``promote`` (see :data:`~ragtiller.policies.schema.Applies`).
        value: The policy's value, as JSON-ready data.
        description: What the field does, and its unit.
    """

    path: str
    applies: str
    value: Any
    description: str


def field_rows(policy: RetrievalPolicy) -> list[FieldRow]:
    """Every leaf field of ``policy`` in schema order; each route's fields under its name.

    Example:
        >>> from ragtiller import load_policy
        >>> row = next(r for r in field_rows(load_policy()) if r.path == "budgets.window_words")
        >>> row.applies, row.value
        ('build', 300)
    """
    return _rows(policy, "")


def _rows(model: BaseModel, prefix: str) -> list[FieldRow]:
    rows: list[FieldRow] = []
    for name, info in type(model).model_fields.items():
        value = getattr(model, name)
        if isinstance(value, BaseModel):
            rows += _rows(value, f"{prefix}{name}.")
        elif name == "routes" and isinstance(value, dict):
            for route, config in value.items():
                rows += _rows(config, f"{prefix}{name}.{route}.")
        else:
            extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
            dumped = model.model_dump(mode="json", include={name})[name]
            applies = str(extra.get("applies", ""))
            rows.append(FieldRow(f"{prefix}{name}", applies, dumped, info.description or ""))
    return rows


def fields_table(policy: RetrievalPolicy) -> str:
    """The rows as a Markdown table (``ragtiller policy show --fields``)."""
    lines = ["| field | applies | value | what it does |", "|---|---|---|---|"]
    for row in field_rows(policy):
        value = json.dumps(row.value, ensure_ascii=False).replace("|", "\\|")
        lines.append(f"| `{row.path}` | {row.applies} | `{value}` | {row.description} |")
    return "\n".join(lines) + "\n"
