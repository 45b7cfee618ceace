"""The fault matrix: each fault injected into each provider slot, and the outcome it must have.

One table drives both the tests (``test_fault_matrix.py``) and ``docs/reliability.md``, so the
docs cannot drift from what is tested. Regenerate the docs with::

    python tests/faults/matrix.py --write
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "reliability.md"

SLOTS = ("embedder", "dense tier", "lexical tier", "reranker", "chat model", "quota store", "cache")


@dataclass(frozen=True)
class Case:
    """One fault in one slot, and the stage record the turn must show for it."""

    slot: str
    fault: str
    stage: str
    status: str
    reason: str | None
    label: str | None
    """A degradation label the manifest and the context must carry (None: no label due)."""
    note: str = ""

    @property
    def id(self) -> str:
        return f"{self.slot}-{self.fault}".replace(" ", "_")


def _provider(slot: str, stage: str, *, fallback: str, tier: str | None = None) -> list[Case]:
    name = f"{stage} ({tier})" if tier else stage
    invalid = f"{name} failed: invalid-output"
    return [
        Case(slot, "raise", stage, "error", fallback, f"{name} failed: {fallback}"),
        Case(slot, "hang", stage, "error", "timeout", f"{name} failed: timeout"),
        Case(slot, "slow past deadline", stage, "error", "timeout", f"{name} failed: timeout"),
        Case(slot, "garbage", stage, "error", "invalid-output", invalid),
        Case(slot, "nan", stage, "error", "invalid-output", invalid),
    ]


CASES: tuple[Case, ...] = (
    *_provider("embedder", "embed", fallback="embed-failed"),
    Case("embedder", "empty", "embed", "error", "invalid-output", "embed failed: invalid-output"),
    Case(
        "embedder",
        "huge",
        "tier_search",
        "error",
        "tier-failed",
        "tier_search (dense) failed: tier-failed",
        "a 100,000-dimension vector: the dense tier refuses it, the lexical tier answers",
    ),
    *(
        case
        for tier in ("dense", "lexical")
        for case in (
            *_provider(f"{tier} tier", "tier_search", fallback="tier-failed", tier=tier),
            Case(
                f"{tier} tier", "empty", "tier_search", "done", None, None, "no hits is an answer"
            ),
            Case(
                f"{tier} tier",
                "huge",
                "tier_search",
                "done",
                None,
                None,
                "100,000 hits are cut to the tier depth",
            ),
            Case(
                f"{tier} tier",
                "duplicate ids",
                "tier_search",
                "error",
                "invalid-output",
                f"tier_search ({tier}) failed: invalid-output",
            ),
        )
    ),
    *_provider("reranker", "rerank", fallback="provider-failed"),
    Case("reranker", "empty", "rerank", "error", "invalid-output", "rerank failed: invalid-output"),
    Case(
        "reranker",
        "foreign ids",
        "rerank",
        "error",
        "invalid-output",
        "rerank failed: invalid-output",
        "a document it was not given never reaches the answer",
    ),
    Case(
        "reranker",
        "duplicate ids",
        "rerank",
        "error",
        "invalid-output",
        "rerank failed: invalid-output",
    ),
    Case("chat model", "raise", "step_back", "error", "llm-error", "step_back failed: llm-error"),
    Case("chat model", "hang", "step_back", "error", "timeout", "step_back failed: timeout"),
    Case(
        "chat model",
        "slow past deadline",
        "step_back",
        "error",
        "timeout",
        "step_back failed: timeout",
    ),
    Case(
        "chat model",
        "garbage",
        "step_back",
        "error",
        "invalid-output",
        "step_back failed: invalid-output",
    ),
    Case(
        "chat model",
        "empty",
        "step_back",
        "error",
        "invalid-output",
        "step_back failed: invalid-output",
    ),
    Case(
        "chat model",
        "huge",
        "step_back",
        "error",
        "invalid-output",
        "step_back failed: invalid-output",
    ),
    Case(
        "quota store",
        "down",
        "step_back",
        "skipped",
        "quota-store-unavailable",
        "step_back skipped: quota-store-unavailable",
        "quotas fail closed",
    ),
    Case(
        "quota store",
        "frozen",
        "step_back",
        "skipped",
        "quota-store-unavailable",
        "step_back skipped: quota-store-unavailable",
        "a SIGSTOPped redis-server costs its socket timeout",
    ),
    Case("cache", "down", "step_back", "done", "generalized", None, "caches fail open: a miss"),
    Case(
        "cache",
        "frozen",
        "step_back",
        "done",
        "generalized",
        None,
        "a SIGSTOPped redis-server: a miss after its socket timeout",
    ),
)


def render() -> str:
    """``docs/reliability.md``: the design, then the table of every tested fault."""
    rows = "\n".join(
        f"| {c.slot} | {c.fault} | `{c.stage}` {c.status}"
        f"{f' (`{c.reason}`)' if c.reason else ''} | {f'`{c.label}`' if c.label else '—'} | {c.note} |"
        for c in CASES
    )
    return f"""# Reliability: every turn ends

<!-- Generated by `python tests/faults/matrix.py --write` from the table the fault tests run;
     edit tests/faults/matrix.py, not this file. -->

A turn answers, degraded and labelled if need be, whatever its providers do. Three mechanisms:

- **Deadlines.** The policy's `deadlines` section bounds each provider call (`embed_s`,
  `tier_s` for each tier, `rerank_s`, `step_back_s`) and the whole turn (`turn_s`); every value
  is finite and positive (defaults 5, 5, 5, 10 and 15 seconds). A stage past its deadline ends
  as `error` with reason `timeout`, and its fallback answers: no query vector means the lexical
  tier only; a tier gives no hits; rerank keeps the fused order; step-back keeps the original
  question. Each stage's deadline is also cut to the time the turn has left: a stage that runs
  out of turn time ends with reason `turn-deadline`, and one that starts with none left is
  skipped with that reason; assemble always answers with what is in hand.
- **Bulkheads** (`ragtiller/bulkhead.py`). Python cannot cancel a thread, so a hung provider's
  thread is abandoned, not stopped. Each provider instance (the embedder, each tier that is not
  ragtiller's own in-process numpy/BM25 search, a chat model without native async) gets its own
  small pool of daemon threads, shared by every graph that uses that instance. A hung provider
  fills only its own pool: never the event loop, the loop's default executor, another provider
  or another graph. A call still queued at its deadline is cancelled before it starts; once the
  pool and its queue are full, calls fail at once. Daemon threads never keep the process from
  exiting. Natively async providers (rerankers, async chat models) are awaited under their
  deadline and cancelled at it; an async provider that blocks the event loop itself cannot be
  defended against, so ragtiller's own providers never do.
- **Checked output** (`ragtiller/nodes/checks.py`). A tier hit needs a `str` id and text and a
  finite score, each id once; a rerank result must be a subset of the candidates it was given,
  each once, with finite scores, and the answer keeps ragtiller's own copy of each candidate; an
  embedding must be a non-empty list of finite numbers. Anything else is that provider's error,
  with reason `invalid-output`, a label, and the fallback.

Every fallback is visible in three places: the stage record (`manifest.stages`), the labels
(`manifest.degraded`) and the context's `<degraded>` block. A tier served by a fallback tier
(Pinecone → embedded) says so in its label. Provider error text is redacted
(`ragtiller/redact.py`) before it is stored: no API key, bearer token or `key=...` survives.

## The fault matrix

Each row is one test in `tests/faults/test_fault_matrix.py`, run through the public API
(`build_graph(...).invoke`). Each asserts that the turn answers within its deadline plus a
small slack, that the named stage has the status, reason and label shown, and that no exception
escapes. Test deadlines are short (0.3 s per stage, 2 s per turn) so the suite stays fast.

| slot | fault | stage outcome | label | note |
|---|---|---|---|---|
{rows}
"""


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        DOC.write_text(render(), encoding="utf-8")
    else:
        print(render(), end="")
