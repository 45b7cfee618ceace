"""The deterministic router on a labelled table of queries."""

from __future__ import annotations

import pytest

from ragtiller.policies import load_policy
from ragtiller.policies.schema import TriggerKind
from ragtiller.routing.rules import classify, find_triggers

POLICY = load_policy()
E, F, S = "exact_lexical_lookup", "factual_lookup", "synthesis"

# (query, expected route or no-retrieval reason, expected broad flag)
TABLE: list[tuple[str, str, bool]] = [
    # no retrieval
    ("", "empty-query", False),
    ("   \n\t ", "empty-query", False),
    ("hi", "greeting", False),
    ("Hello there!", "greeting", False),
    ("thanks!", "greeting", False),
    ("good morning", "greeting", False),
    ("ok", "greeting", False),
    ("asyncio", "too-short", False),
    ("why not?", "too-short", False),
    # exact lexical lookups
    ("What does StopAsyncIteration mean?", E, False),
    ("StopAsyncIteration", E, False),
    ("ValueError: invalid literal for int() with base 10: 'x'", E, False),
    ('Traceback (most recent call last): File "x.py", line 1', E, False),
    ("status of ticket ABC-123", E, False),
    ("what changed in JIRA-4521 last week", E, False),
    ("What does ADR-011 say about promotion?", E, False),
    ("summary of PEP 8 naming rules", E, False),
    ('docs that mention "single-flight cache"', E, False),
    ("how is `max_chunks` used", E, False),
    ("what is max_chunks for", E, False),
    ("how do I use asyncio.gather with timeouts", E, False),
    ("os.path.join behaviour on Windows drives", E, False),
    ("difference between getLogger and basicConfig", E, False),
    ("where is __init__ called for dataclasses", E, False),
    ("KeyError when reading the config", E, False),
    ("explain RetrievalPolicy fields", E, False),
    ("TILLER_PORT", E, False),
    ("what does TILLER_PORT do?", E, False),
    ("E1042", E, False),
    # factual lookups
    ("What is the default timeout for HTTP requests?", F, False),
    ("how many chunks does the default policy return", F, False),
    ("which port does the server listen on by default", F, False),
    ("Where did Guido van Rossum work before Dropbox?", F, False),
    ("what is the boundary layer transition on a flat plate", F, False),
    ("Is NASA data used in the wind tunnel report?", F, False),
    ("when was the retry limit raised to five", F, False),
    ("what year did the project switch to bm25", F, False),
    ("which file stores the quota ledger settings", F, False),
    # synthesis, broad
    ("how do I get started with asyncio?", S, True),
    ("How can I cancel a running task?", S, True),
    ("what is asyncio?", S, True),
    ("What is a context manager?", S, True),
    ("getting started with the retrieval graph", S, True),
    ("give me an overview of the logging module", S, True),
    ("explain generators", S, True),
    ("tell me about the import system", S, True),
    ("how to read a file line by line", S, True),
    # synthesis, not broad
    ("compare json and pickle for serialising nested objects", S, False),
    ("what are the trade-offs between threads and processes for io heavy work", S, False),
    (
        "why does the interpreter keep a global lock and what does it cost multi core programs",
        S,
        False,
    ),
    ("summarize the differences between lists and tuples", S, False),
]


@pytest.mark.parametrize(
    ("query", "expected", "broad"), TABLE, ids=[q[:40] or "<empty>" for q, _, _ in TABLE]
)
def test_router_table(query: str, expected: str, broad: bool) -> None:
    result = classify(query, POLICY)
    got = result.query_type or result.no_retrieval_reason
    assert (got, result.is_broad) == (expected, broad), result.reason


def test_table_covers_every_class() -> None:
    assert len(TABLE) >= 40
    assert {E, F, S} <= {label for _, label, _ in TABLE}


@pytest.mark.parametrize(
    ("query", "kind", "text"),
    [
        ("ticket ABC-123", TriggerKind.TICKET_ID, "ABC-123"),
        ("see RFC 7231 for details", TriggerKind.POLICY_ID, "RFC 7231"),
        ("TypeError: unsupported operand", TriggerKind.ERROR_MESSAGE, "TypeError:"),
        ('find "exact words" here', TriggerKind.QUOTED_PHRASE, '"exact words"'),
        ("use os.path.join now", TriggerKind.IDENTIFIER, "os.path.join"),
        ("the snake_case_name here", TriggerKind.IDENTIFIER, "snake_case_name"),
        ("class CamelCaseName here", TriggerKind.IDENTIFIER, "CamelCaseName"),
        ("is the GIL released", TriggerKind.ACRONYM, "GIL"),
        ("what did Cleverdon measure at the college", TriggerKind.PROPER_NOUN, "Cleverdon"),
    ],
)
def test_each_trigger_kind(query: str, kind: TriggerKind, text: str) -> None:
    assert (kind, text) in find_triggers(query, list(TriggerKind))


def test_disabled_trigger_kinds_do_not_fire() -> None:
    policy = POLICY.model_copy(update={"lexical_triggers": [TriggerKind.TICKET_ID]})
    assert classify("explain RetrievalPolicy fields", policy).query_type == S
    assert find_triggers("the GIL and ABC-1", [TriggerKind.TICKET_ID]) == [
        (TriggerKind.TICKET_ID, "ABC-1")
    ]


def test_sentence_start_is_not_a_proper_noun() -> None:
    assert find_triggers("Aerodynamic heating of a cone", [TriggerKind.PROPER_NOUN]) == []


def test_unicode_query_classifies() -> None:
    assert (
        classify("¿Cómo funciona el módulo asyncio? 日本語のテキスト", POLICY).query_type
        is not None
    )
