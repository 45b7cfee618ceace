"""Plain-data records shared by every layer: hits, candidates, stage records, the tier protocol.

They are ``TypedDict``s, not classes, so that checkpointers, the LangGraph server and
``json.dumps`` all handle them without custom serialisers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NotRequired, Protocol, runtime_checkable

from typing_extensions import TypedDict

TierName = str
"""A tier's name: ``dense``, ``parent_child`` and ``lexical`` are built in; other tiers may add names."""
TierRole = str
"""What a tier does for the switches: ``dense`` (reads the query vector), ``lexical`` (turned
off with ``hybrid``), ``parent_child`` (turned off with ``parent_child``), or a user's own
role, which no switch touches."""
DENSE: TierRole = "dense"
LEXICAL: TierRole = "lexical"
PARENT_CHILD: TierRole = "parent_child"

StageName = Literal["gate", "step_back", "embed", "tier_search", "fuse", "rerank", "assemble"]
STAGES: tuple[StageName, ...] = (
    "gate",
    "step_back",
    "embed",
    "tier_search",
    "fuse",
    "rerank",
    "assemble",
)
StageStatus = Literal["active", "done", "skipped", "error"]

Resource = Literal["chat_gen", "rerank_calls"]
"""A daily quota resource."""
CHAT_RESOURCE: Resource = "chat_gen"
"""Spent by every chat-model call (step-back, LLM router)."""
RERANK_RESOURCE: Resource = "rerank_calls"
"""Spent by every paid rerank call."""


HIT_FIELDS = ("doc_id", "parent_id", "source")
"""Metadata keys a store holds that a :class:`Hit` lifts into fields of its own (the embedded
index and the adapters lift the same ones, and a filter may name them)."""


class Hit(TypedDict):
    """One result of one tier, with the tier's raw score (cosine, BM25, ...)."""

    id: str
    """Chunk id (a child chunk, or a parent section for the parent-child tier); stable across re-ingest."""
    text: str
    score: float
    """The tier's raw score, on the tier's own scale (higher is better)."""
    doc_id: str
    """Id of the source document the chunk came from."""
    parent_id: str | None
    source: str
    """Where the text came from (a file path, a BEIR id, a URL)."""
    metadata: dict[str, Any]


class Candidate(TypedDict):
    """A fused candidate: one chunk with every tier's raw score kept."""

    id: str
    text: str
    doc_id: str
    parent_id: str | None
    source: str
    metadata: dict[str, Any]
    tier_scores: dict[str, float]
    """Raw score per tier that returned this chunk; tiers that missed it are absent, never 0."""
    tier_ranks: dict[str, int]
    """1-based rank per tier that returned this chunk."""
    tier_z: dict[str, float]
    """z-score of the raw score within that tier's whole hit list (the z-score floor sums these)."""
    fused_score: float
    """Score given by the fusion method (RRF, z-score or min-max sum)."""
    position: NotRequired[int]
    """0-based rank in the question's own fusion (the dense passages at their cosine to the
    question, where feedback moved the dense search): the positions documents hold."""
    final_score: NotRequired[float]
    """Score after rerank; its scale depends on the rerank method (see docs/rerank.md)."""


class StageRecord(TypedDict):
    """What one stage did in one turn; the same facts as its final ``pipeline:step`` event."""

    step: StageName
    status: StageStatus
    reason: str | None
    ms: float
    detail: dict[str, Any]
    labels: list[str]
    """Degradation labels: what made this stage worse than the policy's best path."""
    error: NotRequired[str]


@dataclass(frozen=True)
class SearchRequest:
    """One tier search: the query (text and vector), how many hits, and where to look.

    Attributes:
        query: The text lexical tiers read (``embed_query``, which step-back may generalize).
        vector: The query vector dense tiers read; None when the query was not embedded.
        k: Hits wanted, at most.
        namespaces: Namespaces to search; None searches every one.
        filter: A portable metadata filter (:mod:`ragtiller.core.filters`): key -> required
            value (equality, e.g. ``{"tenant": "acme"}``) or list of allowed values
            (membership). A document without the key never matches.
    """

    query: str
    vector: Sequence[float] | None
    k: int
    namespaces: Sequence[str] | None = None
    filter: Mapping[str, Any] | None = None


INDEX_TIER_NAMES = frozenset({"dense", "lexical", "parent_child"})
"""Names of the tiers an embedded index serves. A policy may weigh any of them (the shipped
default weighs ``parent_child``) even in a graph built with fewer, or with tiers of its own."""


@runtime_checkable
class Tier(Protocol):
    """One retrieval tier. Implementations: the embedded numpy/BM25 tiers, Pinecone, any
    LangChain vector store or retriever (:mod:`ragtiller.adapters`), test fakes.

    ``needs_vector`` tells the graph whether the tier reads the query vector (dense tiers) or
    the query text (lexical tiers). Two attributes are optional, read with ``getattr``: a
    ``role`` (:data:`TierRole`; see :func:`tier_role`), and ``native_async``: True when
    ``asearch`` never blocks the event loop, so the graph awaits it instead of running
    ``search`` on the tier's own worker threads.

    A third optional method, ``score_ids(request, ids) -> dict[str, Scored]``, scores chunks
    the tier did not return, in the request's scope (ids out of scope or unknown are left out).
    In-process CPU tiers have it (the embedded dense and BM25 tiers, Rocchio over them);
    ``fusion.misses: exact`` reads it so that a passage one tier missed is fused at that tier's
    own score for it, not at the tier's lowest. A dense tier that keeps its vectors on a server
    offers ``async afetch_vectors(request, ids)`` instead (Pinecone): the fuse node fetches the
    turn's passages once, and exact misses and the neighbours read the
    :class:`~ragtiller.ranking.vector_table.VectorTable` it returns.
    """

    name: TierName
    needs_vector: bool

    def search(self, request: SearchRequest) -> list[Hit]:
        """Return at most ``request.k`` hits, best first."""
        ...

    async def asearch(self, request: SearchRequest) -> list[Hit]:
        """Async twin of :meth:`search`; must not block the event loop."""
        ...


def tier_role(tier: Tier) -> TierRole:
    """The tier's declared ``role``, else its name (so ``dense``, ``lexical`` and
    ``parent_child`` keep their roles, and any other name is a role of its own)."""
    role = getattr(tier, "role", None)
    return role if isinstance(role, str) and role else tier.name
