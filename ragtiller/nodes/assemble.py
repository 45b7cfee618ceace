"""Assemble: cited context, LangChain documents, honest labels and the run manifest."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from langchain_core.documents import Document

from ragtiller.nodes.components import Components, NodeFn
from ragtiller.nodes.context_budget import choose_passages
from ragtiller.nodes.report import build_manifest
from ragtiller.nodes.stage import Stage
from ragtiller.rerankers.floor import identity_order
from ragtiller.types import Candidate

if TYPE_CHECKING:
    from ragtiller.graph.state import RetrievalState

DESIGNED = "designed"
"""Metadata ``status`` of a document that describes something designed but not built."""
NOT_BUILT_LABEL = "[designed, not built]"


def to_document(rank: int, chunk: Candidate) -> Document:
    """A selected chunk as a LangChain document, scores and provenance in metadata."""
    metadata = {
        **chunk["metadata"],
        "id": chunk["id"],
        "citation": rank,
        "doc_id": chunk["doc_id"],
        "source": chunk["source"],
        "parent_id": chunk["parent_id"],
        "tier_scores": chunk["tier_scores"],
        "fused_score": chunk["fused_score"],
        "final_score": chunk.get("final_score", chunk["fused_score"]),
    }
    return Document(page_content=chunk["text"], metadata=metadata, id=chunk["id"])


def render_context(documents: list[Document], labels: list[str], overview: str | None) -> str:
    """Prompt-ready text: numbered sources, then the overview backstop and the labels."""
    parts: list[str] = []
    for doc in documents:
        meta = doc.metadata
        tag = f" {NOT_BUILT_LABEL}" if meta.get("status") == DESIGNED else ""
        parts.append(
            f"[{meta['citation']}] {meta['source'] or meta['doc_id']}{tag}\n{doc.page_content.strip()}"
        )
    if overview:
        parts.append(f"<project-overview>\n{overview.strip()}\n</project-overview>")
    if labels:
        parts.append("<degraded>\n" + "\n".join(f"- {label}" for label in labels) + "\n</degraded>")
    return "\n\n".join(parts)


def make_assemble(deps: Components) -> NodeFn:
    """Build the assemble node bound to ``deps``."""

    async def assemble(state: RetrievalState) -> dict[str, Any]:
        stage = Stage("assemble")
        route = state["route"]
        candidates = state.get("candidates") or []
        ranked = state.get("ranked") or identity_order(candidates, len(candidates))
        chunks, budget_labels = choose_passages(ranked, route["top_k"], deps.policy.budgets)
        documents = [to_document(rank, chunk) for rank, chunk in enumerate(chunks, start=1)]
        inject_map = bool(
            route["is_broad"] and state["step_back"]["status"] != "done" and deps.corpus_map
        )
        designed = sum(1 for d in documents if d.metadata.get("status") == DESIGNED)
        own = [f"{designed} source(s) describe designed, not built, features"] if designed else []
        own += budget_labels
        record = stage.done(
            route["no_retrieval_reason"],
            labels=own,
            documents=len(documents),
            corpus_map=inject_map,
        )
        stages = [*state.get("stages", []), record]
        manifest = build_manifest(state, stages, documents, deps.policy)
        context = render_context(
            documents, manifest.degraded, deps.corpus_map if inject_map else None
        )
        return {
            "documents": documents,
            "context": context,
            "manifest": manifest,
            "stages": [record],
        }

    return assemble
