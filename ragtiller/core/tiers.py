"""Plain-data records shared by every layer: hits, candidates, stage records, the tier protocol.
``TypedDict``s, so that checkpointers, the LangGraph server and ``json.dumps`` take them as they are.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NotRequired, Protocol, get_args, runtime_checkable

from typing_extensions import TypedDict

TierRole = str  # hybrid and parent_child switch off tiers of those roles; one's own role stays
DENSE: TierRole = "dense"
LEXICAL: TierRole = "lexical"
PARENT_CHILD: TierRole = "parent_child"

StageName = Literal["gate", "step_back", "embed", "tier_search", "fuse", "rerank", "assemble"]
STAGES: tuple[StageName, ...] = get_args(StageName)
StageStatus = Literal["active", "done", "skipped", "error"]

# Daily quota resources: every chat-model call (step-back, LLM router), every paid rerank call.
CHAT_RESOURCE = "chat_gen"
RERANK_RESOURCE = "rerank_calls"

HIT_FIELDS = ("doc_id", "parent_id", "source")  # metadata a Hit lifts into fields of its own


class Hit(TypedDict):
    """One result of one tier, with the tier's raw score (cosine, BM25, ...)."""

    id: str  # stable across re-ingest
    text: str
    score: float  # on the tier's own scale, higher is better
    doc_id: str
    parent_id: str | None
    source: str  # a file path, a BEIR id, a URL
    metadata: dict[str, Any]


class Candidate(TypedDict):
    """A fused candidate: one chunk with every tier's raw score kept."""

    id: str
    text: str
    doc_id: str
    parent_id: str | None
    source: str
    metadata: dict[str, Any]
    tier_scores: dict[str, float]  # raw, per tier that returned it (absent, never 0, if not)
    tier_ranks: dict[str, int]  # 1-based
    tier_z: dict[str, float]  # z-score of the raw score within that tier's whole hit list
    fused_score: float
    # 0-based rank in the question's own fusion (dense passages at their cosine to the question,
    # where feedback moved the dense search): the positions documents hold
    position: NotRequired[int]
    final_score: NotRequired[float]  # after rerank, on the method's scale (docs/rerank.md)


class StageRecord(TypedDict):
    """What one stage did in one turn; the same facts as its final ``pipeline:step`` event."""

    step: StageName
    status: StageStatus
    reason: str | None
    ms: float
    detail: dict[str, Any]
    labels: list[str]  # what made this stage worse than the policy's best path
    error: NotRequired[str]


@dataclass(frozen=True)
class SearchRequest:
    """One tier search: the text lexical tiers read, the vector dense tiers read (None: not
    embedded), at most ``k`` hits, the namespaces (None: all) and a portable filter."""

    query: str
    vector: Sequence[float] | None
    k: int
    namespaces: Sequence[str] | None = None
    filter: Mapping[str, Any] | None = None


INDEX_TIER_NAMES = frozenset({"dense", "lexical", "parent_child"})  # a policy may weigh any


@runtime_checkable
class Tier(Protocol):
    """One retrieval tier (embedded, Pinecone, a LangChain store, a fake). Optional, read with
    ``getattr``: ``role`` (:func:`tier_role`), ``native_async`` (``asearch`` never blocks the
    loop, else ``search`` runs on the tier's threads), ``score_ids(request, ids)`` (scores of
    chunks it did not return) and ``async afetch_vectors(request, ids)`` (vectors on a server)."""

    name: str
    needs_vector: bool

    def search(self, request: SearchRequest) -> list[Hit]: ...  # at most k hits, best first

    async def asearch(self, request: SearchRequest) -> list[Hit]: ...


def tier_role(tier: Tier) -> TierRole:
    role = getattr(tier, "role", None)
    return role if isinstance(role, str) and role else tier.name
