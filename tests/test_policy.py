"""Policy loading: the shipped default, and errors that name the file and field path."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ragtiller import PolicyError, RetrievalPolicy, load_policy
from ragtiller.policies import shipped_policies

DEFAULT = yaml.safe_load(
    (Path(__file__).parents[1] / "ragtiller/policies/shipped/default.yaml").read_text("utf-8")
)


def write(tmp_path: Path, data: object, name: str = "policy.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data) if not isinstance(data, str) else data, "utf-8")
    return path


def test_shipped_default_loads_with_every_section() -> None:
    policy = load_policy()
    assert "default" in shipped_policies()
    assert isinstance(policy, RetrievalPolicy)
    assert (policy.policy_id, policy.version, policy.schema_version) == (
        "default-retrieval-policy",
        "2026-12-04",
        2,
    )
    assert policy.routes["exact_lexical_lookup"].hybrid is True
    assert policy.routes["factual_lookup"].rerank is False
    assert policy.routes["factual_lookup"].hybrid is True  # promoted on Cranfield, 2026-11-29
    assert policy.routes["synthesis"].parent_child == "conditional"
    assert policy.router.llm_router == "off"
    assert policy.cache.ttl_s == 21600
    assert policy.quota.chat_gen_per_day == 20
    assert policy.reranker.provider == "zscore"
    assert policy.budgets.candidate_cap == 36
    assert policy.deadlines.turn_s == 15
    # passages, 2026-12-01 (benchmarks/log/)
    assert policy.fusion.method == "zscore"
    assert (policy.budgets.passages_per_document, policy.budgets.context_words) == (5, 1500)
    assert (policy.feedback.enabled, policy.feedback.dense_docs) == (True, 2)


def test_the_schema_defaults_are_the_shipped_default() -> None:
    # default.yaml states its name and routes; every other field is the schema's default, so a
    # policy that sets one field changes that field only
    assert set(DEFAULT) == {"schema_version", "policy_id", "version", "routes"}
    policy = load_policy()
    for name, info in RetrievalPolicy.model_fields.items():
        if name not in DEFAULT:
            assert getattr(policy, name) == info.get_default(call_default_factory=True), name
    one = _broken(fusion__method="rrf")
    changed = RetrievalPolicy.model_validate(one)
    assert changed.model_dump() == {
        **policy.model_dump(),
        "fusion": {**policy.fusion.model_dump(), "method": "rrf"},
    }


def test_policy_is_frozen() -> None:
    policy = load_policy()
    with pytest.raises(ValueError, match="frozen"):
        policy.policy_id = "x"  # type: ignore[misc]


def test_round_trip_through_a_file(tmp_path: Path) -> None:
    assert load_policy(write(tmp_path, DEFAULT)) == load_policy()


def _broken(**changes: object) -> dict[str, object]:
    data = yaml.safe_load(yaml.safe_dump(DEFAULT))
    for dotted, value in changes.items():
        *parents, leaf = dotted.split("__")
        node = data
        for part in parents:
            node = node.setdefault(part, {})
        if value is ...:
            del node[leaf]
        else:
            node[leaf] = value
    return data


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"policy_id": ...}, r"policy_id: Field required"),
        (
            {"budgets__max_chunks": "many"},
            r"budgets\.max_chunks: Input should be a valid integer, unable to parse[^']*$",
        ),
        ({"budgets__max_chunks": 0}, r"budgets\.max_chunks: Input should be greater than 0"),
        ({"step_back__enabld": True}, r"step_back\.enabld: Extra inputs are not permitted"),
        (
            {"routes__lookup_everything": {"top_k": 3}},
            r"routes\.lookup_everything\.\[key\]: Input should be 'exact_lexical_lookup'",
        ),
        ({"routes__synthesis": ...}, r"routes must define synthesis"),
        ({"schema_version": 3}, r"schema_version: Input should be 2"),
        (
            {"reranker__provider": "magic"},
            r"reranker\.provider: Input should be 'zscore', 'identity', 'cross-encoder' or 'cohere'",
        ),
        (
            {"quota__timezone": "Mars/Olympus"},
            r"quota\.timezone: Value error, unknown timezone \(value not shown\); use an IANA",
        ),
        ({"lexical_triggers": ["tickets"]}, r"lexical_triggers\.0: Input should be 'ticket_id'"),
    ],
)
def test_bad_policy_names_file_and_field(
    tmp_path: Path, changes: dict[str, object], message: str
) -> None:
    path = write(tmp_path, _broken(**changes))
    with pytest.raises(PolicyError, match=message) as info:
        load_policy(path)
    assert str(path) in str(info.value)


REMOVED = [  # 2026-12-04 (issue 42): each folded into a mechanism that was already there
    "dense_backend__timeout_s",  # 0.8 of deadlines.tier_s
    "lexical_backend__timeout_s",
    "router__llm_timeout_s",  # deadlines.chat_s
    "deadlines__step_back_s",  # renamed deadlines.chat_s
    "step_back__refund_on_failure",  # never refunded
    "promotion__min_slice_queries",  # 50, eval.promotion.MIN_SLICE_QUERIES
    "reranker__max_cost_usd_per_request_added",  # one call a request, cost_usd_per_call
    "reranker__max_candidates",  # the rerank stage's pool, at most 100
    "feedback__dense",  # feedback.dense_weight: 0 is off
    "router__cache_ttl_s",  # cache.ttl_s
    "step_back__cache_ttl_s",
    "reranker__cache_ttl_s",
    "reranker__exact_match_margin",  # 1.5, policies.decisions.EXACT_MATCH_MARGIN
]


@pytest.mark.parametrize("field", REMOVED)
def test_a_policy_setting_a_removed_field_is_refused_naming_it(tmp_path: Path, field: str) -> None:
    path = write(tmp_path, _broken(**{field: 1}))
    named = field.replace("__", r"\.")
    with pytest.raises(PolicyError, match=rf"{named}: Extra inputs are not permitted"):
        load_policy(path)


def test_missing_file_lists_shipped_policies(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match=r"does not exist; shipped policies: .*default"):
        load_policy(tmp_path / "nope.yaml")


@pytest.mark.parametrize(
    ("text", "message"), [("a: [b", "not valid YAML"), ("- 1\n- 2\n", "expected a mapping")]
)
def test_unparseable_file(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(PolicyError, match=message):
        load_policy(write(tmp_path, text))


def test_empty_file_reports_missing_fields(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match=r"schema_version: Field required"):
        load_policy(write(tmp_path, ""))


def test_policy_error_is_a_value_error() -> None:
    assert issubclass(PolicyError, ValueError)


def test_the_candidate_cap_is_the_multiplier_of_max_chunks_and_never_below_the_floor() -> None:
    budgets = load_policy().budgets
    assert budgets.model_copy(update={"max_chunks": 12}).candidate_cap == 36  # 3 x 12
    assert budgets.model_copy(update={"max_chunks": 2}).candidate_cap == 20
