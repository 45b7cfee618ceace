"""Policy variants for evaluation: a deeper result list, and dotted-key overrides (tune spaces).

Both return a new validated policy; the original is never changed.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from ragtiller.errors import PolicyError
from ragtiller.policies.schema import RetrievalPolicy


def with_depth(
    policy: RetrievalPolicy, depth: int, *, per_document: int | None = 1
) -> RetrievalPolicy:
    """Every route returns ``depth`` results (``top_k``, ``max_chunks`` raised to at least
    ``depth``, and no context word budget to cut them), so Recall@depth is defined; nothing
    else changes: the candidate pool is never smaller than a user's turn gets.

    ``per_document`` sets ``budgets.passages_per_document``: 1 (the default, for
    document-level metrics) makes the results the document ranking, one passage per document
    in rank order, so a document's other passages neither help nor take a slot; None keeps
    the policy's (passage-level metrics).

    Example:
        >>> from ragtiller import load_policy
        >>> with_depth(load_policy(), 100).routes["factual_lookup"].top_k
        100
    """
    routes = {name: {"top_k": depth} for name in policy.routes}
    overrides: dict[str, Any] = {
        "routes": routes,
        # never below the policy's own: max_chunks also sizes the candidate pool, and a smaller
        # pool than a user's turn gets would score a different system
        "budgets.max_chunks": max(depth, policy.budgets.max_chunks),
        "budgets.context_words": None,
    }
    if per_document is not None:
        overrides["budgets.passages_per_document"] = per_document
    return with_overrides(policy, overrides)


def with_overrides(policy: RetrievalPolicy, overrides: Mapping[str, Any]) -> RetrievalPolicy:
    """The policy with each dotted key (``fusion.method``) set; mappings merge into mappings.

    Raises:
        PolicyError: The result is not a valid policy (unknown key, bad value).
    """
    data = policy.model_dump(mode="json")
    for dotted, value in overrides.items():
        *parents, last = dotted.split(".")
        node = data
        for key in parents:
            node = node.setdefault(key, {})
            if not isinstance(node, dict):
                raise PolicyError(f"override {dotted!r}: {key!r} is not a mapping")
        if isinstance(value, Mapping) and isinstance(node.get(last), dict):
            node[last] = _merge(node[last], value)
        else:
            node[last] = value
    try:
        return RetrievalPolicy.model_validate(data)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise PolicyError(
            f"overrides {dict(overrides)} give an invalid policy: {where}: {first['msg']}"
        ) from e


def expand_space(space: Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
    """Every combination of a search space (dotted key -> candidate values), in a stable order.

    Example:
        >>> expand_space({"fusion.method": ["rrf", "zscore"], "fusion.rrf_k": [60]})
        [{'fusion.method': 'rrf', 'fusion.rrf_k': 60}, {'fusion.method': 'zscore', 'fusion.rrf_k': 60}]
    """
    keys = list(space)
    return [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*space.values())]


def policy_sha256(policy: RetrievalPolicy) -> str:
    """Hash of the policy's validated content (key order and YAML formatting do not matter)."""
    canonical = json.dumps(policy.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def _merge(base: dict[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in update.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out
