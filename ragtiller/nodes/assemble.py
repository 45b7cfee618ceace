"""Assemble: cited context, LangChain documents, honest labels and the run manifest."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.documents import Document
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage

from ragtiller.core.tiers import Candidate
from ragtiller.index.lexical import HEADER_KEY
from ragtiller.nodes.channels import PlainManifest
from ragtiller.nodes.components import Components, NodeFn
from ragtiller.nodes.context_budget import choose_passages
from ragtiller.nodes.outline import fit_outline
from ragtiller.nodes.run_input import (
    ANSWER_NAME,
    answer_id,
    answer_text,
    tenant_filter,
    turn_filter,
)
from ragtiller.nodes.stage import Stage
from ragtiller.nodes.state import RetrievalState
from ragtiller.nodes.turn_manifest import build_manifest
from ragtiller.rerankers.floor import identity_order

DESIGNED = "designed"
"""Metadata ``status`` of a document that describes something designed but not built."""
NOT_BUILT_LABEL = "[designed, not built]"


def to_document(rank: int, chunk: Candidate, *, in_context: bool = True) -> Document:
    """A selected chunk as a LangChain document, scores and provenance in metadata, and
    whether the turn's ``context`` holds it (the word budget bounds the context, not the list).
    Not the raw tier scores: a BM25 score carries the corpus-wide IDF, which would tell a tenant
    whether other tenants' documents hold a word (the manifest keeps them, for the operator)."""
    metadata = {
        **chunk["metadata"],
        "id": chunk["id"],
        "citation": rank,
        "in_context": in_context,
        "doc_id": chunk["doc_id"],
        "source": chunk["source"],
        "parent_id": chunk["parent_id"],
        "fused_score": chunk["fused_score"],
        "final_score": chunk.get("final_score", chunk["fused_score"]),
    }
    return Document(page_content=chunk["text"], metadata=metadata, id=chunk["id"])


def render_context(
    documents: list[Document],
    labels: list[str],
    overview: str | None,
    notes: Sequence[str] = (),
) -> str:
    """Prompt-ready text: numbered sources, each under its heading path or title, then the
    overview backstop, the degradation labels and the notes on what the selection left out."""
    parts: list[str] = []
    for doc in documents:
        meta = doc.metadata
        tag = f" {NOT_BUILT_LABEL}" if meta.get("status") == DESIGNED else ""
        # every passage under its heading path (or title): a section's later passages lack it
        heading = meta.get(HEADER_KEY) or meta.get("title")
        under = f" ({heading})" if heading else ""
        parts.append(
            f"[{meta['citation']}] {meta['source'] or meta['doc_id']}{under}{tag}\n"
            f"{doc.page_content.strip()}"
        )
    if overview:
        parts.append(f"<project-overview>\n{overview.strip()}\n</project-overview>")
    if labels:
        parts.append("<degraded>\n" + "\n".join(f"- {label}" for label in labels) + "\n</degraded>")
    if notes:
        parts.append("<notes>\n" + "\n".join(f"- {note}" for note in notes) + "\n</notes>")
    return "\n\n".join(parts)


def answer_messages(state: RetrievalState, context: str, max_chars: int) -> list[AnyMessage]:
    """What the turn appends to the transcript: the question when it came as ``query`` (cut
    to ``max_chars``, as for embedding), then ragtiller's answer (:func:`answer_text`)."""
    turn = state["turn"]
    text = answer_text(context, state["route"]["no_retrieval_reason"])
    answer = AIMessage(text, name=ANSWER_NAME, id=answer_id(turn["run_id"]))
    if turn.get("asked_by") != "query":
        return [answer]
    asked = state["rerank_query"][:max_chars]
    question = HumanMessage(asked, id=f"ragtiller-question-{turn['run_id']}")
    return [question, answer]


def turn_overview(deps: Components, state: RetrievalState) -> tuple[str | None, list[str]]:
    """The corpus outline for a broad turn that step-back did not serve, cut to the turn's
    namespaces, tenant and filter, with a label when an outline exists but cannot be cut to them."""
    route = state["route"]
    budget = deps.policy.budgets.outline_words
    if (
        not (deps.overview and budget and route["is_broad"])
        or state["step_back"]["status"] == "done"
    ):
        return None, []
    tenant, scope = route["tenant"], turn_filter(route)
    text = deps.overview(route["namespaces"], scope)
    if text is None:
        if scope is None:
            what = f"namespaces {', '.join(route['namespaces'])}"
        elif scope == tenant_filter(tenant):
            what = f"tenant {tenant!r}"
        else:
            what = f"filter {scope!r}"
        return None, [f"corpus overview left out: it cannot be limited to {what}"]
    return fit_outline(text, state["rerank_query"], budget) or None, []


def make_assemble(deps: Components) -> NodeFn:
    """Build the assemble node bound to ``deps``."""

    async def assemble(state: RetrievalState) -> dict[str, Any]:
        stage = Stage("assemble")
        route = state["route"]
        top_k, budgets = route["top_k"], deps.policy.budgets
        ranked = state.get("ranked")
        if ranked:
            chunks, shown, budget_labels = choose_passages(ranked, top_k, budgets)
        else:  # the fusion order; the choice never reads final_score, so set it on the chosen
            candidates = state.get("candidates") or []
            chunks, shown, budget_labels = choose_passages(candidates, top_k, budgets)
            chunks = identity_order(chunks, len(chunks))
        in_context = {c["id"]: c for c in shown}
        documents = [
            to_document(rank, chunk, in_context=chunk["id"] in in_context)
            for rank, chunk in enumerate(chunks, start=1)
        ]
        context_documents = [
            Document(page_content=in_context[d.id]["text"], metadata=d.metadata, id=d.id)
            for d in documents
            if d.id in in_context
        ]  # a passage longer than the whole budget is cut in the context only
        overview, own = turn_overview(deps, state)
        designed = sum(1 for d in documents if d.metadata.get("status") == DESIGNED)
        if designed:
            own.append(f"{designed} source(s) describe designed, not built, features")
        record = stage.done(
            route["no_retrieval_reason"],
            labels=own,
            documents=len(documents),
            corpus_map=bool(overview),
            notes=budget_labels,
        )
        stages = [*state.get("stages", []), record]
        manifest = build_manifest(state, stages, documents, deps.policy)
        manifest = manifest.model_copy(update={"notes": budget_labels})
        context = render_context(context_documents, manifest.degraded, overview, budget_labels)
        return {
            "documents": documents,
            "context": context,
            "messages": answer_messages(state, context, deps.policy.budgets.max_query_chars),
            "manifest": PlainManifest(manifest),  # plain data in saved writes
            "stages": [record],
        }

    return assemble
