"""Graph state: a narrow input, a narrow output, and the documented fields in between."""

from __future__ import annotations

from typing import Annotated, Any, Literal, NotRequired

from langchain_core.documents import Document
from langchain_core.messages import AnyMessage
from langgraph.channels.ephemeral_value import EphemeralValue
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict

from ragtiller.core.run_manifest import RunManifest
from ragtiller.core.tiers import Candidate, Hit, StageRecord
from ragtiller.core.turn import QuotaView, RerankDecision, RerankOutcome, Route, StepBack, TierTask
from ragtiller.nodes.channels import ManifestValue, ScopeValue
from ragtiller.nodes.scope import SealedScope


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
    """What a caller passes in: ``query`` or ``messages``; other keys raise ``InputError``."""

    query: NotRequired[Annotated[str, EphemeralValue]]
    """The user's question, verbatim. Held for the gate's step only: a thread's next turn
    never inherits it."""
    messages: NotRequired[Annotated[list[AnyMessage], add_messages]]
    """A chat transcript (as ``MessagesState``): the turn's messages are appended, and so is
    ragtiller's answer. Without ``query``, the question is the last human message that came
    after ragtiller's last answer."""
    namespace: NotRequired[Annotated[str | list[str] | None, EphemeralValue]]
    """Overrides the route's namespace(s) for this turn. Held for the gate's step only, so a
    thread's next turn does not inherit it; the gate's ``route`` carries what was used."""
    tenant: NotRequired[Annotated[str | None, EphemeralValue]]
    """Tenant id, passed to tiers and the corpus overview as a metadata filter. Held for the
    gate's step only, as ``namespace``; ``route["tenant"]`` carries what was used."""


class OutputState(TypedDict):
    """What a turn returns."""

    documents: list[Document]
    """Selected chunks as LangChain documents, best first, with scores in metadata."""
    messages: list[AnyMessage]
    """The transcript with this turn's answer appended: the context as an ``AIMessage`` named
    ``ragtiller`` (and, for a ``query`` input, the question before it as a human message)."""
    context: str
    """Prompt-ready text with numbered citations and any degradation labels."""
    manifest: RunManifest
    """What the turn decided, retrieved and spent."""
    stages: list[StageRecord]
    """This turn's stage records (as in the manifest). Being an output key, it is also what
    each node's ``updates`` event shows on the LangGraph server: the records that node wrote,
    a compact summary of what it decided, not its hit lists."""


class Turn(TypedDict):
    """Facts fixed when the gate starts a turn."""

    run_id: str
    """A fresh id per turn; the manifest's ``run_id``."""
    started_at: float
    """``time.perf_counter()`` when the gate started, for the total latency."""
    quota: QuotaView
    """The one quota read of this turn; it advises the step-back and rerank edges."""
    overrides: NotRequired[dict[str, Any]]
    """The run context's fields set for this turn (see ``RunContext``)."""
    asked_by: NotRequired[Literal["query", "messages"]]
    """Which input key held the question."""


class RetrievalState(InputState, total=False):
    """Everything a turn knows, written by the node named after each field's first word.

    ``embed_query`` and ``rerank_query`` are separate on purpose: step-back may generalize the
    first, the second is always the user's original text.
    """

    turn: Turn
    """Written by the gate."""
    route: Route
    """The gate's routing decision."""
    scope: Annotated[SealedScope, ScopeValue]
    """The tenant, namespaces and filter the turn asked for, sealed for the thread. Kept across
    a thread's turns: the gate refuses a turn that asks for another scope, or whose thread's
    scope does not verify (see :mod:`ragtiller.nodes.scope`)."""
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
    """Written by assemble (see :class:`OutputState`)."""
    context: str
    """Written by assemble."""
    manifest: Annotated[RunManifest, ManifestValue]
    """Written by assemble, from every stage's record; checkpointed as its JSON dict."""
