"""The policy schema's shared parts: value types and the ``applies`` tag every leaf carries."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Toggle = bool | Literal["conditional"]
"""A stage switch: always on, always off, or decided per query (each decision carries a reason)."""

Seconds = Annotated[float, Field(gt=0, allow_inf_nan=False, description="In seconds.")]
"""A duration in seconds: finite and > 0 (``.inf``, ``.nan``, 0 and negatives are rejected)."""

Milliseconds = Annotated[float, Field(gt=0, allow_inf_nan=False, description="In milliseconds.")]
"""A duration in milliseconds: finite and > 0."""

Weight = Annotated[float, Field(ge=0, allow_inf_nan=False)]
"""A fusion weight: finite and >= 0 (0 mutes a tier)."""

Applies = Literal["build", "turn", "promote"]
"""When a field is read: ``build`` once, when the graph (its tiers, reranker, router and stores)
is built; ``turn`` by the nodes on every turn, so a run context's policy may change it;
``promote`` only by ``ragtiller promote``, never by the graph."""


def _tagged(applies: Applies, description: str) -> Any:
    return Field(description=description, json_schema_extra={"applies": applies})


def build_field(description: str) -> Any:
    """A field read when the graph is built: a run policy that changes it is refused, or (its
    fusion, feedback and window) rebuilds the tiers."""
    return _tagged("build", description)


def turn_field(description: str) -> Any:
    """A field the nodes read on every turn."""
    return _tagged("turn", description)


def promote_field(description: str) -> Any:
    """A rule of ``ragtiller promote``; the graph never reads it."""
    return _tagged("promote", description)


class PolicyModel(BaseModel):
    """A policy section: unknown keys are refused, and a loaded policy never changes."""

    model_config = ConfigDict(extra="forbid", frozen=True)
