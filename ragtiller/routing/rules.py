"""The deterministic router: query type, breadth and lexical triggers from regular expressions;
the same query and policy always give the same route, which makes it the trusted default."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ragtiller.policies.schema import RetrievalPolicy, RouteName, TriggerKind

_TRIGGER_PATTERNS: dict[TriggerKind, re.Pattern[str]] = {
    TriggerKind.TICKET_ID: re.compile(r"\b[A-Z][A-Z0-9]{1,9}-\d+\b"),
    TriggerKind.POLICY_ID: re.compile(r"\b(?:ADR|PEP|RFC|POL|POLICY|SEC|ISO|CVE)[- ]?\d[\d-]*\b"),
    TriggerKind.ERROR_MESSAGE: re.compile(
        r"\b[A-Za-z_][\w.]*(?:Error|Exception|Warning)\s*:|Traceback \(most recent call last\)"
        r"|\berror:\s|\bexit (?:code|status) \d+"
        r"|\b[A-Z]{1,3}\d{3,5}\b"  # error codes: E1042, SQL0911
    ),
    TriggerKind.QUOTED_PHRASE: re.compile(r"\"[^\"]{2,}\"|'[^']{2,}'|`[^`]+`|“[^”]{2,}”"),
    TriggerKind.IDENTIFIER: re.compile(
        r"\b[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+\b"  # CamelCase: StopAsyncIteration
        r"|\b[a-z][a-z0-9]*[A-Z]\w*\b"  # lowerCamel: getLogger
        r"|\b[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+(?:\(\))?"  # dotted: asyncio.gather, os.path.join()
        r"|\b_*[a-z][a-z0-9]*(?:_+[a-z0-9]+)+_*\b"  # snake_case: max_chunks, __init__
        r"|\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b"  # SCREAMING_SNAKE: TILLER_PORT
        r"|\b__\w+__\b"
    ),
    TriggerKind.ACRONYM: re.compile(r"\b[A-Z][A-Z0-9]{1,5}s?\b"),
}
# match order: a text claimed by a specific kind is not reported again by a vaguer one
_SPECIFIC_FIRST = (*_TRIGGER_PATTERNS, TriggerKind.PROPER_NOUN)
_STRONG = set(_SPECIFIC_FIRST) - {TriggerKind.ACRONYM, TriggerKind.PROPER_NOUN}  # name one thing

_GREETING = re.compile(
    r"^\s*(?:hi|hello|hey|howdy|yo|thanks|thank you|thx|ok|okay|cool|bye|good (?:morning|afternoon|evening)"
    r"|how are you|what's up|whats up)\b[\s!.?,]*(?:there|all|everyone|team|bot)?[\s!.?,]*$",
    re.IGNORECASE,
)
_WHAT_IS = re.compile(  # broad only when X is a short concept name (at most three words)
    r"^\s*(?:what (?:is|are)|what's)\s+(?:an?\s+|the\s+)?(\S+(?:\s+\S+){0,2})\s*\??\s*$", re.I
)
_BROAD = re.compile(
    r"^\s*(?:how (?:do|can|should|would) (?:i|we|you)\b|how to\b|"
    r"getting started\b|get started\b|where do i start\b|overview of\b|an overview\b|"
    r"give me an overview\b|introduction to\b|intro to\b|explain\b|tell me about\b)"
    r"|\b(?:getting started|overview of|beginner'?s guide|best practices)\b",
    re.IGNORECASE,
)
_SYNTHESIS = re.compile(
    r"\b(?:compare|comparison|difference(?:s)? between|differ|versus|vs\.?|pros and cons|trade-?offs?|"
    r"why (?:does|do|is|are|should|would)|explain|overview|summar(?:y|ize|ise)|relationship between|"
    r"best practices?|when should|how does .+ work|design|architecture|approach(?:es)?)\b",
    re.IGNORECASE,
)
_SENTENCE_START_WORDS = re.compile(r"(?:^|[.!?]\s+)([A-Z][a-z]+)")
_PROPER_NOUN = re.compile(r"(?<![.!?]\s)(?<!^)\b([A-Z][a-z]{2,})\b")
_NOT_PROPER = {"The", "What", "How", "Why", "When", "Where", "Which", "Who", "Are", "Can", "Does"}
BROAD_MAX_WORDS = 14  # a broad question is short; a longer one is specific enough on its own


@dataclass(frozen=True)
class Classification:
    query_type: RouteName | None  # None: the input needs no retrieval
    no_retrieval_reason: str | None = None
    is_broad: bool = False
    triggers: list[tuple[TriggerKind, str]] = field(default_factory=list)
    reason: str = ""

    @property
    def trigger_labels(self) -> list[str]:
        return [f"{kind.value}:{text}" for kind, text in self.triggers]


def find_triggers(query: str, enabled: list[TriggerKind]) -> list[tuple[TriggerKind, str]]:
    """The lexical triggers of the enabled kinds that fire on ``query``, in a stable order."""
    found: list[tuple[TriggerKind, str]] = []
    seen: set[str] = set()
    for kind in _SPECIFIC_FIRST:
        if kind not in enabled:
            continue
        matches = _proper_nouns(query) if kind is TriggerKind.PROPER_NOUN else _matches(kind, query)
        for text in matches:
            if not any(text in other for other in seen):
                seen.add(text)
                found.append((kind, text))
    return found


def _matches(kind: TriggerKind, query: str) -> list[str]:
    texts = [m.group(0) for m in _TRIGGER_PATTERNS[kind].finditer(query)]
    if kind is TriggerKind.IDENTIFIER:
        texts = [
            t for t in texts if not re.fullmatch(r"[\d.]+|e\.g\.?|i\.e\.?|etc\.", t, re.IGNORECASE)
        ]
    return texts


def _proper_nouns(query: str) -> list[str]:
    starts = {m.group(1) for m in _SENTENCE_START_WORDS.finditer(query)}
    return [
        m.group(1)
        for m in _PROPER_NOUN.finditer(query)
        if m.group(1) not in starts
        and m.group(1) not in _NOT_PROPER
        and not _TRIGGER_PATTERNS[TriggerKind.IDENTIFIER].fullmatch(m.group(1))
    ]


def classify(query: str, policy: RetrievalPolicy) -> Classification:
    """Classify ``query`` into a route, flag broad questions, and list the lexical triggers."""
    text = " ".join(query.split())
    if not text:
        return Classification(None, "empty-query", reason="the query is empty")
    if not any(ch.isalnum() for ch in text):
        return Classification(
            None, "no-words", reason="the query has no letters or digits to search for"
        )
    triggers = find_triggers(text, list(policy.lexical_triggers))
    if _GREETING.match(text):
        return Classification(
            None, "greeting", triggers=triggers, reason="a greeting, not a question"
        )
    shortest = policy.router.min_query_chars
    if len(text) < shortest and not triggers:
        return Classification(
            None, "too-short", reason=f"under {shortest} characters with no lexical trigger"
        )
    words = len(text.split())
    strong = sorted({kind.value for kind, _ in triggers if kind in _STRONG})
    route: RouteName
    if strong:
        route, broad, reason = "exact_lexical_lookup", False, f"exact trigger ({', '.join(strong)})"
    elif (_BROAD.search(text) or _WHAT_IS.match(text)) and words <= BROAD_MAX_WORDS:
        route, broad, reason = "synthesis", True, "broad question"
    elif _SYNTHESIS.search(text) or words > 30:
        route, broad, reason = "synthesis", False, "asks to explain, compare or summarise"
    else:
        route, broad = "factual_lookup", False
        reason = "a specific question without exact identifiers"
    return Classification(route, is_broad=broad, triggers=triggers, reason=reason)


def trigger_kind(text: str) -> TriggerKind:
    """The kind of a trigger the chat model named: the pattern matching all of it, else
    ``quoted_phrase`` (several words), ``proper_noun`` (capitalised) or ``identifier``."""
    for kind, found in find_triggers(text, list(TriggerKind)):
        if found == text:
            return kind
    if len(text.split()) > 1:
        return TriggerKind.QUOTED_PHRASE
    return TriggerKind.PROPER_NOUN if text[:1].isupper() else TriggerKind.IDENTIFIER
