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

A turn answers, degraded and labelled if need be, whatever its providers do and whatever load
it meets. Four mechanisms:

- **Deadlines.** The policy's `deadlines` section bounds each provider call (`embed_s`,
  `tier_s` for each tier, `rerank_s`, `chat_s` for each chat-model call) and the whole turn (`turn_s`); every value
  is finite and positive (defaults 5, 5, 5, 10 and 15 seconds). A Pinecone query gets 0.8 of
  `tier_s`, so the embedded fallback keeps time to answer. A stage past its deadline ends
  as `error` with reason `timeout`, and its fallback answers: no query vector means the lexical
  tier only; a tier gives no hits; rerank keeps the fused order; step-back keeps the original
  question. Each stage's deadline is also cut to the time the turn has left: a stage that runs
  out of turn time ends with reason `turn-deadline`, and one that starts with none left is
  skipped with that reason; assemble always answers with what is in hand. **Every wait inside
  a stage is cut to its deadline** (`ragtiller.core.bulkhead.within` makes it the ambient deadline
  of everything the stage awaits): a wait for a bulkhead worker, for the quota, for the model,
  and the Redis cache's wait for another replica computing the same step-back or route, which
  takes at most half of the time left (the other half is the stage's own to compute it). LLM
  routing, the first thing a turn does, takes at most `chat_s`, cut to `turn_s`.
- **Bulkheads** (`ragtiller/core/bulkhead.py`). Python cannot cancel a thread, so a hung provider's
  thread is abandoned, not stopped. Each provider instance (the embedder, each tier that is not
  ragtiller's own in-process numpy/BM25 search, a chat model without native async, the Cohere
  and cross-encoder rerankers) gets its own pool of daemon threads, found by identity and
  shared by every graph that uses that instance; a provider that cannot be weakly referenced
  (a `@dataclass(slots=True)`, say) is kept alive by its entry, so it keeps its one pool too.
  A hung provider fills only its own pool: never the event loop, the loop's default executor,
  another provider or another graph. No chat call runs on a loop's default executor, the LLM
  router's included: a model with native async is awaited and cancelled at its deadline, any
  other runs its sync call on its bulkhead (`ragtiller.core.providers.ainvoke_chat`).
  - *Admission, not shedding.* A pool starts threads as calls come, up to 32 running at once,
    and lets them go after a minute idle. Past that a call waits for a worker, within its
    deadline; a call cut by its deadline before it got a worker, or before it ran for its
    whole deadline because it waited for one (more than 5% of it), is **skipped with reason
    `overloaded`** (label `embed skipped: overloaded`, `tier_search (dense) skipped:
    overloaded`, ...): the process was saturated, the provider did nothing wrong, and its
    breaker does not count it. Only a call that ran for (nearly) its whole deadline is a
    `timeout`. A provider's own client-side throttle counts as such a wait, not as the
    provider running: `ServiceEmbeddings` waits for its `concurrency` bound and its rate limit
    at most the call's time left (`ragtiller.core.bulkhead.call_time_left`, `throttled`),
    reserves no rate slot it could not wait for, and ends the call `overloaded`.
  - *Abandonment.* A call still running at its deadline is abandoned: its thread stops counting
    against the 32 (the pool may start another while its breaker is closed; once the breaker
    has opened, calls queued in the same burst get no new thread to hang on, so spare threads
    are left for the probe) and counts against 32 spare ones instead, so a
    provider holds at most 64 threads, however its calls hang; when a hung call returns, its
    thread serves again. (A provider whose 64 threads are all held by calls that never return
    is refused, `hung`, until one of them does: threads are bounded, never leaked.)
  - *Recovery.* Three calls in a row abandoned at their deadline (after running for nearly all
    of it) open the pool's circuit breaker, as for Redis (`ragtiller/core/breaker.py`): the provider's
    calls fail at once, **error with reason `hung`** (`embed failed: hung`), costing neither a
    deadline nor a thread. After 5 s one call goes through as a probe; an answer in time (a
    result or the provider's own error) closes the breaker, so a provider that hung and
    recovered serves again within one probe pause. `bulkhead_for(provider, name, **settings)`
    sets a pool's bounds before its first use.
- **Checked output** (`ragtiller/nodes/checks.py`). A tier hit needs a `str` id and text and a
  finite score, each id once; a rerank result must be a subset of the candidates it was given,
  each once, with finite scores, and the answer keeps ragtiller's own copy of each candidate; an
  embedding must be a non-empty list of finite numbers. Anything else is that provider's error,
  with reason `invalid-output`, a label, and the fallback.
- **Checked stores** (`ragtiller/stores/`). A Redis key may hold what a person or another tool
  put there. A quota counter that is not a string of digits (`abc`, `5.5`, `-3`, a hash) fails
  closed (`quota-store-unavailable`, logged with its key) and never raises, `asnapshot()`
  included; a count beyond the limit, however large, is a spent budget. The day is the store's
  (Redis `TIME`), not each replica's clock: see [redis.md](redis.md#the-day-is-the-stores). A
  cache entry that is not JSON, not a value its reader can use (a step-back question, a route
  choice), longer than 1 MiB or not a Redis string is a miss, replaced by the next answer; a
  compute lock with no expiry, or a longer one than its 15 s, is cut to 15 s. A call that finds
  no pooled connection free in time (more turns in flight than connections: redis-py's `No
  connection available`) is overload, not an outage: it fails as `StoreOverloaded` (`Redis
  overloaded` in the log; the quota still fails closed, the cache still misses), and the
  Redis breaker does not count it, so a healthy Redis under load is never cut off for every
  turn.

Every fallback is visible in three places: the stage record (`manifest.stages`), the labels
(`manifest.degraded`) and the context's `<degraded>` block. A tier whose backend's fallback
answered (Pinecone → embedded: a step of the tier-search node) says so in its stage record
(`served_by`, `fallback_reason`) and its label; the node writes them from what it saw, never
from a document's metadata. Provider error text is redacted
(`ragtiller/core/redact.py`) before it is stored: no API key, bearer token or `key=...` survives.

## Load, recovery and hostile stores

Beside the matrix below, `tests/faults/test_load.py` runs through `ainvoke`: 50 and 200 turns
in flight with healthy providers (instant and 100 ms, every one on a bulkhead), none degraded;
a truly saturated embedder (one worker), labelled `overloaded` and never `failed`; an embedder
that hung on its first four calls, serving again within one probe pause; a hung embedder, a
hung `@dataclass(slots=True)` tier and a hung sync-only chat model over 1,000 turns each, their
threads within the pool's bound; and a hung sync-only chat model through the LLM router and
step-back, after which the application's loop still runs `asyncio.to_thread` and
`getaddrinfo`, its default executor was never used, `asyncio.run` returns, and another graph's
sync `invoke` with a sync callback handler answers. `tests/test_stores_hostile.py` seeds, in a
real redis-server, every key a turn reads (both quota counters, the step-back and router cache
entries, their locks) with wrong values and wrong types: each turn answers within its deadline,
fails closed where quota is concerned, labelled. `benchmarks/bench_load.py` measures
throughput and p95 at 50 and 200 turns in flight (see `benchmarks/README.md`).

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
