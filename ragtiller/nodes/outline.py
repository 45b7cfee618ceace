"""The corpus outline a broad turn shows: the part of it the question is about, in few words.

The outline is the backstop for a broad question step-back could not generalize. Shown whole
it crowded the answers out of a small context (550 of 748 words on one trial), so a turn keeps
its header, then the documents whose title or sections share a term with the question (most
shared terms first, each with its matching sections), within ``budgets.outline_words``. A
question that names no document's terms ("what is in here?") gets the outline's start.
"""

from __future__ import annotations

from ragtiller.index.lexical import DEFAULT_LEXICAL, analyze
from ragtiller.nodes.context_budget import words


def fit_outline(outline: str, question: str, budget: int) -> str:
    """``outline`` cut to what ``question`` is about, in at most ``budget`` words (0: none).

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
