"""Durations and fusion weights in a policy: finite, in range, or a PolicyError naming the field."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml

from ragtiller import PolicyError, load_policy
from ragtiller.policies import parse_policy

DEFAULT = yaml.safe_load(
    (Path(__file__).parents[1] / "ragtiller/policies/shipped/default.yaml").read_text("utf-8")
)

SECONDS_FIELDS = [
    ("deadlines", "embed_s"),
    ("deadlines", "tier_s"),
    ("deadlines", "rerank_s"),
    ("deadlines", "chat_s"),
    ("deadlines", "turn_s"),
    ("cache", "ttl_s"),
    ("reranker", "max_p95_latency_ms_added"),
    ("promotion", "max_p95_latency_ms"),
]


def _with(section: str, field: str, value: object) -> dict[str, object]:
    data = yaml.safe_load(yaml.safe_dump(DEFAULT))
    data.setdefault(section, {})[field] = value
    return data


@pytest.mark.parametrize(("section", "field"), SECONDS_FIELDS)
@pytest.mark.parametrize(
    ("value", "message"),
    [
        (math.inf, "finite number"),
        (-math.inf, "finite number"),
        (math.nan, "finite number"),
        (0, "greater than 0"),
        (-1, "greater than 0"),
    ],
)
def test_a_duration_must_be_finite_and_positive(
    section: str, field: str, value: float, message: str
) -> None:
    with pytest.raises(PolicyError, match=rf"  {section}\.{field}: Input should be .*{message}"):
        parse_policy(_with(section, field, value), source="p.yaml")


def test_yaml_infinity_is_rejected_with_the_file_and_field(tmp_path: Path) -> None:
    text = yaml.safe_dump(_with("deadlines", "chat_s", 1.0)).replace("chat_s: 1.0", "chat_s: .inf")
    path = tmp_path / "policy.yaml"
    path.write_text(text, "utf-8")
    with pytest.raises(PolicyError) as info:
        load_policy(path)
    assert str(info.value).splitlines() == [
        f"invalid retrieval policy {path}:",
        "  deadlines.chat_s: Input should be a finite number",  # never the value itself
    ]


@pytest.mark.parametrize(("section", "field"), SECONDS_FIELDS)
def test_a_finite_positive_duration_is_kept(section: str, field: str) -> None:
    policy = parse_policy(_with(section, field, 2.5 if "ttl" not in field else 7))
    assert getattr(getattr(policy, section), field) == (2.5 if "ttl" not in field else 7)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (math.inf, "finite number"),
        (math.nan, "finite number"),
        (-0.5, "greater than or equal to 0"),
    ],
)
def test_a_tier_weight_must_be_finite_and_not_negative(value: float, message: str) -> None:
    data = _with("fusion", "tier_weights", {"dense": 1.0, "lexical": value})
    with pytest.raises(PolicyError, match=rf"fusion\.tier_weights\.lexical: .*{message}"):
        parse_policy(data)


def test_a_zero_tier_weight_mutes_a_tier_and_is_allowed() -> None:
    policy = parse_policy(_with("fusion", "tier_weights", {"dense": 0, "lexical": 2}))
    assert policy.fusion.tier_weights == {"dense": 0.0, "lexical": 2.0}
