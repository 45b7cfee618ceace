"""The run manifest: one JSON-serialisable record of what a turn did and why."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ragtiller.core.tiers import StageName, StageStatus


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


class StageSummary(_Record):
    """One stage's outcome; a stage that did not run says ``skipped`` and why."""

    step: StageName
    status: StageStatus
    reason: str | None = None
    ms: float = Field(0.0, description="Wall time of the stage, in milliseconds.")
    detail: dict[str, Any] = Field(default_factory=dict)
    labels: list[str] = Field(
        default_factory=list, description="What made this stage worse than the best path."
    )
    error: str | None = None


class ScoredId(_Record):
    id: str
    score: float


class Decision(_Record):
    """Whether a switch (hybrid, fusion, rerank) was on for this turn, its setting, and why."""

    enabled: bool
    setting: str = Field(description="The policy value: 'true', 'false' or 'conditional'.")
    reason: str


class StepBackRecord(_Record):
    """What step-back did: the original and generalized text, and where the text came from."""

    status: StageStatus = "skipped"
    reason: str | None = None
    original: str = ""
    generalized: str | None = None
    from_cache: bool = False


class RunManifest(_Record):
    """Everything a turn decided, retrieved and spent; built once per turn by assemble."""

    run_id: str
    created_at: str = Field(description="UTC, ISO 8601.")
    policy_id: str
    policy_version: str
    overrides: dict[str, Any] = Field(
        default_factory=dict, description="Run-context fields that overrode the policy this turn."
    )
    router: Literal["deterministic", "llm"] = "deterministic"
    router_detail: dict[str, Any] = Field(default_factory=dict)
    query_type: str = Field(description="Route name, or 'no_retrieval'.")
    no_retrieval_reason: str | None = None
    is_broad: bool = False
    triggers: list[str] = Field(default_factory=list)
    embed_query: str = ""
    rerank_query: str = ""
    query_truncated: bool = False
    tenant: str | None = Field(None, description="The tenant filter the turn applied.")
    candidate_namespaces: list[str] = Field(default_factory=list)
    selected_namespaces: list[str] = Field(default_factory=list)
    top_k: dict[str, int] = Field(default_factory=dict, description="Size asked of each stage.")
    hybrid: Decision | None = None
    parent_child: Decision | None = None
    rerank: Decision | None = None
    fusion_method: str | None = None
    step_back: StepBackRecord = Field(default_factory=StepBackRecord)
    tiers: dict[str, list[ScoredId]] = Field(
        default_factory=dict, description="Raw scores per tier."
    )
    tier_errors: dict[str, str] = Field(default_factory=dict)
    fused: list[ScoredId] = Field(default_factory=list)
    reranked: list[ScoredId] = Field(default_factory=list)
    rerank_method: str | None = None
    rerank_detail: dict[str, Any] = Field(default_factory=dict)
    latency_ms: dict[str, float] = Field(default_factory=dict, description="Per stage and 'total'.")
    llm_calls: int = 0
    cost_usd: float = Field(0.0, description="Incremental cost of this turn, in USD.")
    quota_remaining: dict[str, int] = Field(default_factory=dict)
    # whose daily budget each quota_remaining figure is: the shared one, or the turn's tenant's
    quota_budget: dict[str, Literal["shared", "tenant"]] = Field(default_factory=dict)
    # what went worse than the policy asked: a stage skipped, failed, timed out or fell back
    degraded: list[str] = Field(default_factory=list)
    # why the result has its shape when nothing went wrong (fewer matched, the budget's cuts)
    notes: list[str] = Field(default_factory=list)
    stages: list[StageSummary] = Field(default_factory=list)

    def stage(self, step: StageName) -> StageSummary:
        """The summary of stage ``step`` (the last one, for tier-search which runs per tier)."""
        for summary in reversed(self.stages):
            if summary.step == step:
                return summary
        raise KeyError(f"stage {step!r} not in manifest; stages: {[s.step for s in self.stages]}")
