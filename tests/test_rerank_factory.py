"""``reranker_from_policy``: the floor from the policy, the ceiling only with eval evidence."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fixtures.cohere_stub import CohereStub
from fixtures.fakes import hit

from ragtiller.core.tiers import Candidate
from ragtiller.errors import ConfigurationError
from ragtiller.policies.evidence import ARTIFACT_KIND, ARTIFACT_SCHEMA_VERSION
from ragtiller.policies.schema import RerankerConfig
from ragtiller.ranking.fusion import fuse_hits
from ragtiller.rerankers import (
    CeilingReranker,
    CohereReranker,
    CrossEncoderReranker,
    IdentityReranker,
    ZScoreReranker,
    reranker_from_policy,
)
from ragtiller.stores import MemoryQuotaLedger

KEY = "stub-key-0123456789"


def candidates() -> list[Candidate]:
    hits = [hit("dense", "a", 2.0, text="billing"), hit("dense", "b", 1.0, text="reset password")]
    return fuse_hits({"dense": hits}, method="rrf", cap=5)


def artifact(
    tmp_path: Path, decision: str, *, lift: float = 0.04, kind: str = ARTIFACT_KIND
) -> str:
    """A `ragtiller promote` artifact with the given decision and overall NDCG@10 lift."""
    path = tmp_path / "decision.json"
    body = {
        "kind": kind,
        "schema_version": ARTIFACT_SCHEMA_VERSION,
        "decision": decision,
        "lifts": {"all": {"mean": lift}},
        "rules": {"required_slices": []},
    }
    path.write_text(json.dumps(body), encoding="utf-8")
    return str(path)


class Lengths:
    def predict(self, pairs: list[tuple[str, str]]) -> list[float]:
        return [float(len(text)) for _, text in pairs]


@pytest.fixture
def stub() -> Iterator[CohereStub]:
    with CohereStub() as server:
        yield server


@pytest.mark.parametrize(
    ("provider", "kind"),
    [("zscore", ZScoreReranker), ("identity", IdentityReranker)],
)
def test_floor_alone_without_a_ceiling(provider: str, kind: type) -> None:
    config = RerankerConfig.model_validate({"provider": provider})
    assert isinstance(reranker_from_policy(config), kind)


def test_cross_encoder_floor_needs_a_model() -> None:
    config = RerankerConfig(provider="cross-encoder")
    with pytest.raises(ConfigurationError, match="no model was given; pass cross_encoder="):
        reranker_from_policy(config)
    assert isinstance(reranker_from_policy(config, cross_encoder=Lengths()), CrossEncoderReranker)


async def test_promoted_cohere_ceiling_is_used(stub: CohereStub, tmp_path: Path) -> None:
    config = RerankerConfig(ceiling="cohere", ceiling_eval_artifact=artifact(tmp_path, "promote"))
    ceiling = CohereReranker(api_key=KEY, base_url=stub.url, env={})
    try:
        reranker = reranker_from_policy(
            config, cohere=ceiling, ledger=MemoryQuotaLedger({"rerank_calls": 3})
        )
        result = await reranker.arerank("reset password", candidates(), top_n=2)
    finally:
        ceiling.close()
    assert isinstance(reranker, CeilingReranker)
    assert result.method == "cohere"
    assert [c["id"] for c in result.candidates] == ["b", "a"]
    assert len(stub.requests) == 1


@pytest.mark.parametrize(
    ("decision", "note"),
    [
        ("reject", "has decision 'reject', not 'promote'"),
        (None, "ceiling_eval_artifact is not"),
        ("missing-file", "cannot read reranker.ceiling_eval_artifact"),
        ("no-lift", "shows no NDCG@10 lift"),
        ("not-an-artifact", "is not a `ragtiller promote` decision"),
    ],
)
async def test_ceiling_without_eval_lift_is_disabled(
    stub: CohereStub, tmp_path: Path, decision: str | None, note: str
) -> None:
    path = None
    if decision == "missing-file":
        path = str(tmp_path / "absent.json")
    elif decision == "no-lift":
        path = artifact(tmp_path, "promote", lift=-0.01)
    elif decision == "not-an-artifact":
        path = artifact(tmp_path, "promote", kind="something-else")
    elif decision is not None:
        path = artifact(tmp_path, decision)
    config = RerankerConfig(ceiling="cohere", ceiling_eval_artifact=path)
    ceiling = CohereReranker(api_key=KEY, base_url=stub.url, env={})
    reranker = reranker_from_policy(config, cohere=ceiling, ledger=MemoryQuotaLedger({}))
    result = await reranker.arerank("reset password", candidates(), top_n=2)
    assert result.method == "zscore"
    assert result.detail["ceiling"] == "skipped"
    assert result.detail["ceiling_reason"] == "no-eval-lift"
    assert note in result.detail["ceiling_note"]
    assert stub.requests == []


async def test_eval_lift_not_required_and_default_cohere_reads_env(stub: CohereStub) -> None:
    config = RerankerConfig(ceiling="cohere", require_eval_lift=False)
    reranker = reranker_from_policy(config, env={})
    assert isinstance(reranker, CeilingReranker)
    result = await reranker.arerank("reset password", candidates(), top_n=2)
    assert result.detail["provider"] == "cohere"
    assert result.detail["ceiling_reason"] == "no-credentials"


def test_paid_provider_is_a_ceiling_over_zscore() -> None:
    config = RerankerConfig(provider="cohere", require_eval_lift=False)
    reranker = reranker_from_policy(config, env={"COHERE_API_KEY": KEY})
    assert isinstance(reranker, CeilingReranker)
    assert isinstance(reranker.floor, ZScoreReranker)
    assert isinstance(reranker.ceiling, CohereReranker)
    assert reranker.ceiling.max_candidates == 100
    assert reranker.ceiling.has_credentials


async def test_cross_encoder_ceiling(tmp_path: Path) -> None:
    config = RerankerConfig(
        ceiling="cross-encoder",
        ceiling_eval_artifact=artifact(tmp_path, "promote"),
        cost_usd_per_call=0.0,
    )
    reranker = reranker_from_policy(config, cross_encoder=Lengths())
    result = await reranker.arerank("q", candidates(), top_n=2)
    assert result.method == "cross-encoder"
    assert [c["id"] for c in result.candidates] == ["b", "a"]  # longer text first
    assert result.detail["cost_usd"] == 0.0
