"""Graph state: a narrow input, a narrow output, and the internal fields in between."""

from __future__ import annotations

from typing import Annotated, Any, NotRequired

from langchain_core.documents import Document
from typing_extensions import TypedDict

from ragtiller.manifest import RunManifest
from ragtiller.types import Candidate, Hit, StageRecord


def stage_log(left: list[StageRecord] | None, right: list[StageRecord] | None) -> list[StageRecord]:
    """Append stage records; a ``gate`` record starts a new turn's log.

    The gate is the first stage of every turn, so this keeps a checkpointed thread's log to the
    current turn without a separate reset field.
    """
    new = right or []
    if any(record["step"] == "gate" for record in new):
        return list(new)
    return [*(left or []), *new]


def tier_results(
    left: dict[str, list[Hit]] | None, right: dict[str, list[Hit]] | None
) -> dict[str, list[Hit]]:
    """Merge the hits of tiers running in parallel; ``None`` (written by the gate) resets."""
    if right is None:
        return {}
    return {**(left or {}), **right}


class InputState(TypedDict):
    """What a caller passes in."""

    query: str
    """The user's question, verbatim."""
    namespace: NotRequired[str | list[str] | None]
    """Overrides the route's namespace(s) for this turn."""
    tenant: NotRequired[str | None]
    """Tenant id; recorded in the manifest and passed to tiers as a metadata filter."""


class OutputState(TypedDict):
    """What a turn returns."""

    documents: list[Document]
    """Selected chunks as LangChain documents, best first, with scores in metadata."""
    context: str
    """Prompt-ready text with numbered citations and any degradation labels."""
    manifest: RunManifest
    """What the turn decided, retrieved and spent."""


class Route(TypedDict):
    """The gate's decision for this turn."""

    query_type: str
    """``exact_lexical_lookup``, ``factual_lookup``, ``synthesis`` or ``no_retrieval``."""
    no_retrieval_reason: str | None
    is_broad: bool
    triggers: list[str]
    """Lexical triggers that fired, as ``kind:text``."""
    namespaces: list[str]
    top_k: int
    hybrid: dict[str, Any]
    """``{"enabled": bool, "setting": str, "reason": str}``; same shape for fusion and rerank."""
    fusion: dict[str, Any]
    rerank: dict[str, Any]
    router: str
    """``deterministic`` or ``llm``."""
    router_detail: dict[str, Any]


class TierTask(TypedDict):
    """The payload sent to one parallel tier-search branch."""

    tier: str
    query: str
    vector: list[float] | None
    k: int
    namespaces: list[str]
    filter: dict[str, Any] | None


class RetrievalState(InputState, total=False):
    """Everything a turn knows. ``embed_query`` and ``rerank_query`` are separate on purpose."""

    run_id: str
    route: Route
    is_broad: bool
    embed_query: str
    """Text that is embedded and searched; step-back may generalize it."""
    rerank_query: str
    """Text the reranker scores against: always the user's original question."""
    query_truncated: bool
    step_back: dict[str, Any]
    """``{status, reason, original, generalized, from_cache}``."""
    query_vector: list[float] | None
    tier_tasks: list[TierTask]
    """Tiers the embed node planned for this turn, one parallel branch each."""
    tier_hits: Annotated[dict[str, list[Hit]], tier_results]
    candidates: list[Candidate]
    rerank_decision: dict[str, Any]
    chunks: list[Candidate]
    rerank_method: str | None
    rerank_detail: dict[str, Any]
    stages: Annotated[list[StageRecord], stage_log]
    started_at: float
    """``time.perf_counter()`` when the gate started, for the total latency."""
    documents: list[Document]
    context: str
    manifest: RunManifest
