"""The passages a turn returns: distinct, at most ``passages_per_document`` of a document, and
together within ``budgets.context_words``; every passage left out is named in a label."""

from __future__ import annotations

import re

from ragtiller.core.tiers import Candidate
from ragtiller.nodes.rerank import select_distinct
from ragtiller.policies.schema import BudgetsConfig

MAX_WORD_CHARS = 20
"""Longest run of characters counted as one word: a longer one (a URL, a base64 blob, text
without spaces) counts as one word per ``MAX_WORD_CHARS`` characters."""
_IDEOGRAPHS = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_WORD = re.compile(f"[{_IDEOGRAPHS}]|[^\\s{_IDEOGRAPHS}]{{1,{MAX_WORD_CHARS}}}")
"""One word of the budget: a CJK character (those scripts put no spaces between words), or a
run of other non-space characters, at most ``MAX_WORD_CHARS`` long."""


_UNLIKE_ENGLISH = re.compile(f"[{_IDEOGRAPHS}]|[^\\s]{{{MAX_WORD_CHARS + 1},}}")
"""Text :func:`words` must count one match at a time; any other is counted by ``split``."""


def words(text: str) -> int:
    """The words of ``text`` as the budget counts them (see :data:`_WORD`), so the budget bounds
    the context's size in any script: whitespace-separated words in English text.

    Example:
        >>> words("one two three"), words("鍵の回転"), words("x" * 45)
        (3, 4, 3)
    """
    if _UNLIKE_ENGLISH.search(text) is None:  # the same count, at C speed
        return len(text.split())
    return sum(1 for _ in _WORD.finditer(text))


def first_words(text: str, n: int) -> str:
    """``text`` up to the end of its ``n``-th word (as :func:`words` counts them)."""
    end = 0
    for count, match in enumerate(_WORD.finditer(text), start=1):
        end = match.end()
        if count == n:
            break
    return text[:end]


def fit_context(passages: list[Candidate], budget: int) -> tuple[list[Candidate], str | None]:
    """The passages, in order, whose words fit in ``budget``; a label for what did not fit.

    A passage that does not fit is left out and later, shorter ones still get their turn. The
    first passage is never left out: when it alone is longer than the budget, it is cut to its
    first ``budget`` words (and the label says so).

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
            cut = first_words(cand["text"], budget)
            kept.append({**cand, "text": cut})
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


def choose_passages(
    ranked: list[Candidate], top_k: int, budgets: BudgetsConfig
) -> tuple[list[Candidate], list[Candidate], list[str]]:
    """The turn's passages (``top_k`` of them, when the ranking has them), those of them the
    context holds (the word budget bounds the context text, never the list a caller asked for),
    and the labels saying why fewer came back or what the context left out."""
    per_document = budgets.passages_per_document
    selection = select_distinct(ranked, top_k, per_document)
    chosen, shown, over = selection.chosen, selection.chosen, None
    if budgets.context_words is not None:
        shown, over = fit_context(chosen, budgets.context_words)
    labels = [label for label in (selection.shortfall_label(per_document), over) if label]
    return chosen, shown, labels
