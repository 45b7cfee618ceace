"""Assemble: cited context, LangChain documents, honest labels and the run manifest.

The passages a turn returns are distinct, at most ``passages_per_document`` of a document, and
together within ``budgets.context_words`` in the context; every passage left out is labelled.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from langchain_core.documents import Document
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage

from ragtiller.core.tiers import Candidate
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
from ragtiller.nodes.turn_manifest import build_manifest
from ragtiller.policies.schema import BudgetsConfig
from ragtiller.ranking.recipe import doc_key
from ragtiller.rerankers.floor import identity_order

MAX_WORD_CHARS = 20  # a longer run (a URL, text without spaces) is a word per 20 characters
_IDEOGRAPHS = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_WORD = re.compile(f"[{_IDEOGRAPHS}]|[^\\s{_IDEOGRAPHS}]{{1,{MAX_WORD_CHARS}}}")
"""A CJK character (those scripts put no spaces between words), or a run of other non-space."""
_UNLIKE_ENGLISH = re.compile(f"[{_IDEOGRAPHS}]|[^\\s]{{{MAX_WORD_CHARS + 1},}}")  # else: split


def words(text: str) -> int:
    """The words of ``text`` as the budget counts them, so it bounds the context in any script.

    Example:
        >>> words("one two three"), words("鍵の回転"), words("x" * 45)
        (3, 4, 3)
    """
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
    """The passages, in order, whose words fit in ``budget``, and a label for what did not.

    A passage that does not fit is left out and later, shorter ones still get their turn; the
    first one is never left out, but cut to ``budget`` words when it alone is longer.

    Example:
        >>> p = [{"id": i, "text": t} for i, t in [("a", "one two"), ("b", "x " * 5), ("c", "y")]]
        >>> kept, label = fit_context(p, 3)  # type: ignore[arg-type]
        >>> [c["id"] for c in kept], label
        (['a', 'c'], 'context budget 3 words: left out 1 of 3 passages (rank 2; 5 words)')
    """
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
    """``outline`` cut to what ``question`` is about, in at most ``budget`` words (0: none): its
    header, then the documents whose title or sections share a term with the question (most
    shared first, with their matching sections); the outline's start when none does. Shown
    whole, it crowded the answers out of a small context (550 of 748 words on one trial).

    Example:
        >>> outline = "Corpus: 2 documents, 3 sections.\\n- Jobs\\n  - Retries: How often.\\n" \\
        ...     "  - Visibility timeout: How long a job stays hidden.\\n- Billing: Plans."
        >>> print(fit_outline(outline, "what is the visibility timeout?", 20))
        Corpus: 2 documents, 3 sections.
        - Jobs
          - Visibility timeout: How long a job stays hidden.
    """
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
    """The best ``top_n`` passages, at most ``per_document`` of one document, and a label when
    fewer came back. A passage that a chosen one contains, is part of (a parent-child window
    and a child inside it) or repeats word for word is skipped: the context would repeat text."""
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
    """The turn's passages, those the context holds (the budget bounds the context, never the
    list asked for), and the labels for what came back short or was left out."""
    chosen, short = select_distinct(ranked, top_k, budgets.passages_per_document)
    shown, over = chosen, None
    if budgets.context_words is not None:
        shown, over = fit_context(chosen, budgets.context_words)
    return chosen, shown, [label for label in (short, over) if label]


DESIGNED = "designed"  # the metadata status of a document on something not built


def to_document(rank: int, chunk: Candidate, *, in_context: bool = True) -> Document:
    """A chosen chunk as a LangChain document. Not its raw tier scores: a BM25 score carries the
    corpus-wide IDF, which would tell a tenant whether other tenants' documents hold a word."""
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
    if labels:
        parts.append("<degraded>\n" + "\n".join(f"- {label}" for label in labels) + "\n</degraded>")
    if notes:
        parts.append("<notes>\n" + "\n".join(f"- {note}" for note in notes) + "\n</notes>")
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
    """The outline for a broad turn step-back did not serve, cut to the turn's scope; a label
    when it cannot be."""
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
