"""Policy variants for evaluation (a deeper result list, dotted-key overrides), and hashes."""

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
    """Every route returns ``depth`` results, so Recall@depth is defined; ``per_document`` 1
    makes them the document ranking (one passage each), None keeps the policy's passages."""
    overrides: dict[str, Any] = {
        "routes": {name: {"top_k": depth} for name in policy.routes},
        # max_chunks also sizes the candidate pool: a pool smaller than a user's turn gets
        # would score a different system
        "budgets.max_chunks": max(depth, policy.budgets.max_chunks),
        "budgets.context_words": None,
    }
    if per_document is not None:
        overrides["budgets.passages_per_document"] = per_document
    return with_overrides(policy, overrides)


def with_overrides(policy: RetrievalPolicy, overrides: Mapping[str, Any]) -> RetrievalPolicy:
    """The policy with each dotted key (``fusion.method``) set; mappings merge into mappings."""
    data = policy.model_dump(mode="json")
    for dotted, value in overrides.items():
        *parents, last = dotted.split(".")
        node = data
        for key in parents:
            node = node.setdefault(key, {})
            if not isinstance(node, dict):
                raise PolicyError(f"override {dotted!r}: {key!r} is not a mapping")
        node[last] = _merge(node.get(last), value)
    try:
        return RetrievalPolicy.model_validate(data)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise PolicyError(
            f"overrides {dict(overrides)} give an invalid policy: {where}: {first['msg']}"
        ) from e


def _merge(base: Any, update: Any) -> Any:
    if not (isinstance(update, Mapping) and isinstance(base, dict)):
        return update
    return {**base, **{key: _merge(base.get(key), value) for key, value in update.items()}}


def expand_space(space: Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
    """Every combination of a search space (dotted key -> values), in a stable order."""
    keys = list(space)
    return [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*space.values())]


def policy_sha256(policy: RetrievalPolicy) -> str:
    """Hash of the policy's validated content (not of its YAML's formatting)."""
    canonical = json.dumps(policy.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def policy_ref(policy: RetrievalPolicy) -> dict[str, str]:
    """How artifacts name a policy: its id, version and :func:`policy_sha256`."""
    return {
        "policy_id": policy.policy_id,
        "version": policy.version,
        "sha256": policy_sha256(policy),
    }
