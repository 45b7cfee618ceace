"""Graph state and its channels. Checkpoints hold plain data only (LangGraph's strict msgpack mode
refuses other classes): the run manifest's channel saves its JSON dict."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal, NotRequired, Self

from langchain_core.documents import Document
from langchain_core.messages import AnyMessage
from langgraph.channels.ephemeral_value import EphemeralValue
from langgraph.channels.last_value import LastValue
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict

from ragtiller.core.run_manifest import RunManifest
from ragtiller.core.tiers import Candidate, Hit, StageRecord
from ragtiller.core.turn import QuotaView, RerankDecision, RerankOutcome, Route, StepBack, TierTask
from ragtiller.errors import InputError
from ragtiller.nodes.scope import SealedScope

CHECKPOINT_TYPES: tuple[tuple[str, str], ...] = (("ragtiller.core.run_manifest", "RunManifest"),)
"""(module, class) pairs a parent graph's own state may hold beyond plain data and documents."""


def checkpoint_serde() -> JsonPlusSerializer:
    """A serializer that also restores a run manifest a parent graph's own state holds (the
    retrieval graph's own checkpoints need none).

    Example:
        >>> from langgraph.checkpoint.memory import InMemorySaver
        >>> saver = InMemorySaver(serde=checkpoint_serde())
    """
    return JsonPlusSerializer(allowed_msgpack_modules=list(CHECKPOINT_TYPES))


class PlainManifest(dict[str, Any]):
    """A manifest's JSON dict that still holds its model: checkpoints and ``updates`` events
    carry the plain dict, and the channel hands out the model without validating it again."""

    __slots__ = ("model",)

    def __init__(self, model: RunManifest) -> None:
        super().__init__(model.model_dump(mode="json"))
        self.model = model


class ManifestValue(LastValue[Any]):
    """The ``manifest`` channel: a ``RunManifest`` to nodes and callers, its JSON dict in
    checkpoints. A dict read back or written by ``update_state`` is validated on first read."""

    __slots__ = ("model",)

    def __init__(self, typ: Any = RunManifest, key: str = "") -> None:
        super().__init__(typ, key)
        self.model: RunManifest | None = None

    def copy(self) -> Self:
        empty = super().copy()
        empty.model = self.model
        return empty

    def update(self, values: Sequence[RunManifest | dict[str, Any] | None]) -> bool:
        if not super().update(values):
            return False
        written = values[-1]
        if written is None:  # the gate starts a turn: no manifest until assemble writes one
            self.value, self.model = type(self)().value, None
            return True
        if isinstance(written, RunManifest):
            self.model, self.value = written, written.model_dump(mode="json")
        else:
            self.model, self.value = getattr(written, "model", None), dict(written)
        return True

    def get(self) -> RunManifest:
        if self.model is None:
            self.model = RunManifest.model_validate(super().get())
        return self.model


class ScopeValue(LastValue[Any]):
    """The ``scope`` channel: it refuses a write that is not a mapping, None above all, since
    ``update_state`` could otherwise erase a thread's scope; the graph's input step refuses the
    thread's next turn when the value's seal does not verify."""

    __slots__ = ()

    def update(self, values: Sequence[Any]) -> bool:
        if any(not isinstance(value, Mapping) for value in values):
            raise InputError(
                "a thread's scope can be written only by its turns, and never erased; "
                "use a new thread_id"
            )
        return super().update(values)


def stage_log(left: list[StageRecord] | None, right: list[StageRecord] | None) -> list[StageRecord]:
    """Append stage records; a ``gate`` record (every turn's first) starts a new turn's log."""
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
    """What a caller passes in: ``query`` or ``messages``; other keys raise ``InputError``."""

    query: NotRequired[Annotated[str, EphemeralValue]]
    """The user's question, verbatim; held for the gate's step only."""
    messages: NotRequired[Annotated[list[AnyMessage], add_messages]]
    """A chat transcript; without ``query``, the question is the last human message after
    ragtiller's last answer. The turn's messages and its answer are appended."""
    namespace: NotRequired[Annotated[str | list[str] | None, EphemeralValue]]
    """Overrides the route's namespace(s) for this turn (``route`` carries what was used)."""
    tenant: NotRequired[Annotated[str | None, EphemeralValue]]
    """Tenant id, a metadata filter on every tier and the overview, for this turn."""


class OutputState(TypedDict):
    """What a turn returns."""

    documents: list[Document]
    """Selected chunks as LangChain documents, best first, with scores in metadata."""
    messages: list[AnyMessage]
    """The transcript with this turn's answer appended (an ``AIMessage`` named ``ragtiller``)."""
    context: str
    """Prompt-ready text with numbered citations and any degradation labels."""
    manifest: RunManifest
    """What the turn decided, retrieved and spent."""
    stages: list[StageRecord]
    """This turn's stage records: what each node's ``updates`` event shows on the server."""


class Turn(TypedDict):
    """Facts fixed when the gate starts a turn."""

    run_id: str
    """A fresh id per turn; the manifest's ``run_id``."""
    started_at: float
    """``time.perf_counter()`` when the gate started."""
    quota: QuotaView
    """The one quota read of this turn; it advises the step-back and rerank edges."""
    overrides: NotRequired[dict[str, Any]]
    """The run context's fields set for this turn."""
    asked_by: NotRequired[Literal["query", "messages"]]
    """Which input key held the question."""


class RetrievalState(InputState, total=False):
    """Everything a turn knows, written by the node named after each field's first word."""

    turn: Turn
    """Written by the gate."""
    route: Route
    """The gate's routing decision."""
    scope: Annotated[SealedScope, ScopeValue]
    """The scope the turn asked for, sealed for the thread and kept across its turns."""
    embed_query: str
    """Text that is embedded and searched; step-back may generalize it."""
    rerank_query: str
    """Text the reranker scores against: always the user's original question."""
    step_back: StepBack
    """Set by the gate (skipped, or pending) and completed by the step-back node."""
    tier_tasks: list[TierTask]
    """Tiers the embed node planned for this turn, one parallel branch each."""
    tier_hits: Annotated[dict[str, list[Hit]], tier_results]
    """Each tier's hits, best first, merged from the parallel branches."""
    candidates: list[Candidate]
    """The fuse node's candidates, best first."""
    rerank: RerankDecision | None
    """The fuse node's decision for the rerank edge (None until fuse runs)."""
    ranked: list[Candidate]
    """The rerank node's order of the candidates (absent when rerank did not run)."""
    rerank_outcome: RerankOutcome | None
    """How the rerank node ordered them (None when it did not run)."""
    stages: Annotated[list[StageRecord], stage_log]
    """Every stage's final record, in the order they ended."""
    documents: list[Document]
    """Written by assemble."""
    context: str
    """Written by assemble."""
    manifest: Annotated[RunManifest, ManifestValue]
    """Written by assemble; checkpointed as its JSON dict."""
