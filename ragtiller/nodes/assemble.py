"""Assemble: cited context, LangChain documents, honest labels and the run manifest."""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from langchain_core.documents import Document
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage

from ragtiller.core.run_manifest import RunManifest
from ragtiller.core.tiers import CHAT_RESOURCE, RERANK_RESOURCE, STAGES, Candidate, StageRecord
from ragtiller.core.turn import Decision as DecisionRecord
from ragtiller.index.lexical import DEFAULT_LEXICAL, HEADER_KEY, analyze
from ragtiller.nodes.components import Components, NodeFn
from ragtiller.nodes.run_input import (
    ANSWER_NAME,
    answer_id,
    answer_text,
    tenant_filter,
    turn_filter,
)
from ragtiller.nodes.stage import Stage
from ragtiller.nodes.state import PlainManifest, RetrievalState
from ragtiller.policies.schema import BudgetsConfig, RetrievalPolicy
from ragtiller.ranking.recipe import doc_key
from ragtiller.rerankers.base import identity_order

MAX_WORD_CHARS = 20  # a longer run (a URL, text without spaces) is a word per 20 characters
_IDEOGRAPHS = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
# a CJK character (those scripts put no spaces between words), or a run of other non-space
_WORD = re.compile(f"[{_IDEOGRAPHS}]|[^\\s{_IDEOGRAPHS}]{{1,{MAX_WORD_CHARS}}}")
_UNLIKE_ENGLISH = re.compile(f"[{_IDEOGRAPHS}]|[^\\s]{{{MAX_WORD_CHARS + 1},}}")  # else: split


def words(text: str) -> int:
    """The words of ``text`` as the budget counts them, so it bounds the context in any script."""
    if _UNLIKE_ENGLISH.search(text) is None:  # the same count, at C speed
        return len(text.split())
    return sum(1 for _ in _WORD.finditer(text))


def first_words(text: str, n: int) -> str:
    end = 0
    for count, match in enumerate(_WORD.finditer(text), start=1):
        end = match.end()
        if count == n:
            break
    return text[:end]


def fit_context(passages: list[Candidate], budget: int) -> tuple[list[Candidate], str | None]:
    """The passages that fit ``budget`` words (the first cut, never left out), and a label."""
    kept: list[Candidate] = []
    left: list[tuple[int, int]] = []
    used = 0
    notes: list[str] = []
    for rank, cand in enumerate(passages, start=1):
        size = words(cand["text"])
        if not kept and size > budget:
            kept.append({**cand, "text": first_words(cand["text"], budget)})
            used = budget
            notes.append(f"passage 1 cut from {size} to {budget} words")
        elif used + size <= budget:
            kept.append(cand)
            used += size
        else:
            left.append((rank, size))
    if left:
        ranks = ", ".join(str(r) for r, _ in left)
        notes.append(
            f"left out {len(left)} of {len(passages)} passages "
            f"(rank{'s' if len(left) > 1 else ''} {ranks}; {sum(s for _, s in left)} words)"
        )
    return kept, (f"context budget {budget} words: " + "; ".join(notes)) if notes else None


def fit_outline(outline: str, question: str, budget: int) -> str:
    """``outline`` cut to what ``question`` shares a term with: whole, it crowded answers out."""
    if budget <= 0 or not outline.strip():
        return ""
    header, *lines = outline.strip().splitlines()
    blocks: list[list[str]] = []
    for line in lines:
        if line.startswith("  ") and blocks:
            blocks[-1].append(line)
        elif line.startswith("- "):
            blocks.append([line])  # "... and N more documents" closes no block: left out
    asked = set(analyze([question], DEFAULT_LEXICAL)[0])
    chosen: list[tuple[int, list[str]]] = []
    for block in blocks:
        terms = [asked & set(analyze([line], DEFAULT_LEXICAL)[0]) for line in block]
        shared = len(set().union(*terms))
        if shared:
            sections = [line for line, t in zip(block[1:], terms[1:], strict=True) if t]
            chosen.append((shared, [block[0], *(sections or block[1:2])]))
    if chosen:
        chosen.sort(key=lambda pair: -pair[0])  # stable: outline order among equals
        picked = [lines for _, lines in chosen]
    else:
        picked = blocks
    out, used = [header], words(header)
    for line in (line for block in picked for line in block):
        used += words(line)
        if used > budget:
            break
        out.append(line)
    return "\n".join(out)


def select_distinct(
    ranked: list[Candidate], top_n: int, per_document: int
) -> tuple[list[Candidate], str | None]:
    """The best ``top_n`` passages, capped per document, none repeating a chosen one's text."""
    chosen: list[Candidate] = []
    ids: set[str] = set()
    texts: set[str] = set()
    related_to_chosen: set[str] = set()  # the chosen ones' parents and children
    per_doc: dict[tuple[str, str], int] = {}
    over_cap = repeats = 0
    for cand in ranked:
        if len(chosen) == top_n:
            break
        children = cand["metadata"].get("child_ids", ())
        if (
            cand["id"] in ids
            or cand["parent_id"] in ids
            or not ids.isdisjoint(children)
            or cand["text"] in texts
            or cand["id"] in related_to_chosen
        ):
            repeats += 1
            continue
        key = doc_key(cand)
        if per_doc.get(key, 0) >= per_document:
            over_cap += 1
            continue
        per_doc[key] = per_doc.get(key, 0) + 1
        chosen.append(cand)
        ids.add(cand["id"])
        texts.add(cand["text"])
        related_to_chosen.update(children)
        if cand["parent_id"] is not None:
            related_to_chosen.add(cand["parent_id"])
    if len(chosen) >= top_n:
        return chosen, None
    why = [f"only {len(chosen)} distinct passage(s) matched"]
    if over_cap:
        why.append(f"{over_cap} more over passages_per_document {per_document}")
    if repeats:
        why.append(f"{repeats} repeating a chosen passage")
    return chosen, f"assemble: {len(chosen)} of {top_n} passages: " + "; ".join(why)


def choose_passages(
    ranked: list[Candidate], top_k: int, budgets: BudgetsConfig
) -> tuple[list[Candidate], list[Candidate], list[str]]:
    """The passages, those the context's budget holds, and labels for what was short or out."""
    chosen, short = select_distinct(ranked, top_k, budgets.passages_per_document)
    shown, over = chosen, None
    if budgets.context_words is not None:
        shown, over = fit_context(chosen, budgets.context_words)
    return chosen, shown, [label for label in (short, over) if label]


DESIGNED = "designed"  # the metadata status of a document on something not built


def to_document(rank: int, chunk: Candidate, *, in_context: bool = True) -> Document:
    """No raw tier scores: BM25's corpus-wide IDF would tell of other tenants' words."""
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
    documents: list[Document], labels: list[str], overview: str | None, notes: Sequence[str] = ()
) -> str:
    parts: list[str] = []
    for doc in documents:
        meta = doc.metadata
        tag = " [designed, not built]" if meta.get("status") == DESIGNED else ""
        # every passage under its heading path (or title): a section's later passages lack it
        heading = meta.get(HEADER_KEY) or meta.get("title")
        under = f" ({heading})" if heading else ""
        parts.append(
            f"[{meta['citation']}] {meta['source'] or meta['doc_id']}{under}{tag}\n"
            f"{doc.page_content.strip()}"
        )
    if overview:
        parts.append(f"<project-overview>\n{overview.strip()}\n</project-overview>")
    for tag, items in (("degraded", labels), ("notes", notes)):
        if items:
            parts.append(f"<{tag}>\n" + "\n".join(f"- {item}" for item in items) + f"\n</{tag}>")
    return "\n\n".join(parts)


def answer_messages(state: RetrievalState, context: str, max_chars: int) -> list[AnyMessage]:
    turn = state["turn"]
    text = answer_text(context, state["route"]["no_retrieval_reason"])
    answer = AIMessage(text, name=ANSWER_NAME, id=answer_id(turn["run_id"]))
    if turn.get("asked_by") != "query":
        return [answer]
    asked = state["rerank_query"][:max_chars]
    question = HumanMessage(asked, id=f"ragtiller-question-{turn['run_id']}")
    return [question, answer]


def turn_overview(deps: Components, state: RetrievalState) -> tuple[str | None, list[str]]:
    """The outline for a broad turn step-back did not serve, cut to its scope; else a label."""
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


def _scored(items: list[Any], key: str) -> list[dict[str, Any]]:
    return [{"id": c["id"], "score": float(c[key])} for c in items]


def _decision(record: DecisionRecord | None) -> dict[str, Any] | None:
    if record is None:
        return None
    return {"enabled": record["enabled"], "setting": record["setting"], "reason": record["reason"]}


def build_manifest(
    state: RetrievalState,
    stages: list[StageRecord],
    documents: list[Document],
    policy: RetrievalPolicy,
) -> RunManifest:
    """Validated from plain data in one pass: one pydantic-core call, not one per scored id."""
    route, turn = state["route"], state["turn"]
    ordered = sorted(stages, key=lambda r: STAGES.index(r["step"]))
    latency: dict[str, float] = {}
    for record in ordered:
        latency[record["step"]] = latency.get(record["step"], 0.0) + record["ms"]
    latency["total"] = (time.perf_counter() - turn["started_at"]) * 1000.0
    calls = [(r["step"], int(r["detail"].get("llm_calls", 0))) for r in stages]
    llm_calls = sum(n for _, n in calls)
    # the gate read the quota after its router's call: only later calls come off what it read
    spent_after = sum(n for step, n in calls if step != "gate")
    outcome = state.get("rerank_outcome")
    rerank_detail = outcome["detail"] if outcome else {}
    paid = (
        1 if rerank_detail.get("ceiling") == "used" and not rerank_detail.get("from_cache") else 0
    )
    quota = turn["quota"]
    own = quota.get("tenant_chat_left")  # a tenant's own budget, never moved by another's turns
    plan = state.get("rerank")
    retrieved = route["query_type"] != "no_retrieval"
    sb = state["step_back"]
    bound = policy.budgets.max_query_chars  # a huge query is cut, as for embedding, not copied
    data: dict[str, Any] = dict(
        run_id=turn["run_id"],
        created_at=datetime.now(UTC).isoformat(),
        policy_id=policy.policy_id,
        policy_version=policy.version,
        overrides=turn.get("overrides", {}),
        router=route["router"],
        router_detail=route["router_detail"],
        query_type=route["query_type"],
        no_retrieval_reason=route["no_retrieval_reason"],
        is_broad=route["is_broad"],
        triggers=route["triggers"],
        embed_query=state.get("embed_query", ""),
        rerank_query=state.get("rerank_query", "")[:bound],
        query_truncated=route["truncated"],
        candidate_namespaces=sorted(
            {ns for config in policy.routes.values() for ns in config.namespaces}
        ),
        selected_namespaces=route["namespaces"],
        tenant=route["tenant"],
        top_k={
            "tier": policy.tier_hits,
            "candidates": policy.budgets.candidate_cap,
            "final": route["top_k"],
        }
        if retrieved
        else {},
        hybrid=_decision(route["hybrid"]),
        parent_child=_decision(route["parent_child"]),
        rerank=_decision(plan),
        fusion_method=policy.fusion.method if state.get("candidates") else None,
        step_back={
            "status": sb["status"],
            "reason": sb["reason"],
            "original": sb["original"][:bound],
            "generalized": sb["generalized"],
            "from_cache": sb["from_cache"],
        },
        tiers={tier: _scored(hits, "score") for tier, hits in state.get("tier_hits", {}).items()},
        tier_errors={
            r["detail"]["tier"]: r.get("error", "")
            for r in stages
            if r["step"] == "tier_search" and r["status"] == "error"
        },
        fused=_scored(state.get("candidates") or [], "fused_score"),
        reranked=[
            {"id": d.metadata["id"], "score": float(d.metadata["final_score"])} for d in documents
        ],
        rerank_method=outcome["method"] if outcome else ("identity" if documents else None),
        rerank_detail=rerank_detail,
        latency_ms=latency,
        llm_calls=llm_calls,
        cost_usd=float(rerank_detail.get("cost_usd", 0.0)),
        quota_remaining={
            CHAT_RESOURCE: max(0, (quota["chat_left"] if own is None else own) - spent_after),
            RERANK_RESOURCE: max(0, quota["rerank_left"] - paid),
        },
        quota_budget={
            CHAT_RESOURCE: "shared" if own is None else "tenant",
            RERANK_RESOURCE: "shared",
        },
        degraded=[label for record in ordered for label in record["labels"]],
        stages=ordered,
    )
    return RunManifest.model_validate(data)


def make_assemble(deps: Components) -> NodeFn:

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
