"""Step-back: at most ONE chat call per broad turn turns the question into a more general one.

The quota view only advises (another turn may have spent the last unit); the generalized text
feeds ``embed_query`` only, never ``rerank_query``.

A failed call is NOT refunded: the provider may have billed it, and a refund would let a
failing model be retried on every turn, burning latency instead of quota. A call that never
reached the model (its bulkhead had no worker in time, or refuses a model that keeps hanging)
is refunded.

Every wait is cut to the stage's deadline; a cached generalization is used only if still valid.
"""

from __future__ import annotations

import re
from typing import Any, TypeGuard

from langchain_core.messages import HumanMessage, SystemMessage

from ragtiller.core.bulkhead import DeadlineExceeded, Overloaded, ProviderHung, time_left, within
from ragtiller.core.providers import ainvoke_chat
from ragtiller.core.tiers import CHAT_RESOURCE
from ragtiller.nodes.components import Components, NodeFn
from ragtiller.nodes.stage import (
    HUNG,
    OVERLOADED,
    TURN_DEADLINE,
    Deadline,
    Stage,
    deadline,
    skipped,
)
from ragtiller.nodes.state import RetrievalState
from ragtiller.stores import cache_key

MAX_STEP_BACK_CHARS = 300
STEP_BACK_PROMPT = (
    "You rewrite a user's question into ONE more general question that retrieves the background "
    "needed to answer it (a 'step-back' question). Reply with the question only: one line, no "
    "answer, no preamble, no quotes."
)
_ANSWERISH = re.compile(
    r"^(?:answer|sure|here(?:'s| is)|the answer|step-back question)\b", re.IGNORECASE
)


class StepBackFailed(Exception):
    """The model's call or output was unusable; carries the stage reason."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class QuotaSpent(Exception):
    """No chat call left today (or the quota store is down, which counts as spent); ``detail``
    names the tenant's own budget when that is what ran out."""

    def __init__(self, reason: str, budget: str = "shared") -> None:
        super().__init__(reason)
        self.reason = reason
        self.detail = {"quota_budget": budget} if budget == "tenant" else {}


def normalize(text: str) -> str:
    return " ".join(text.casefold().split())


def validate_step_back(original: str, text: str) -> str:
    """The cleaned step-back question: one line of at most 300 characters, not the input
    again, and not an answer ("Answer:", "Sure", "Here is"); else :class:`StepBackFailed`."""
    cleaned = text.strip().strip("\"'“”").strip()
    if not cleaned:
        raise StepBackFailed("invalid-output", "empty step-back question")
    if "\n" in cleaned:
        raise StepBackFailed("invalid-output", "step-back output has more than one line")
    if len(cleaned) > MAX_STEP_BACK_CHARS:
        raise StepBackFailed(
            "invalid-output",
            f"step-back output is {len(cleaned)} characters (max {MAX_STEP_BACK_CHARS})",
        )
    if normalize(cleaned) == normalize(original):
        raise StepBackFailed("invalid-output", "step-back output repeats the question")
    if _ANSWERISH.match(cleaned) or not cleaned.endswith("?"):
        raise StepBackFailed("invalid-output", "step-back output is not a single question")
    return cleaned


def usable(original: str, cached: object) -> TypeGuard[str]:
    if not isinstance(cached, str):
        return False
    try:
        validate_step_back(original, cached)
    except StepBackFailed:
        return False
    return True


def step_back_key(original: str, tenant: str | None = None) -> str:
    """The hashed cache key of ``original``'s generalization, per tenant (in hex, which the
    key's casefolding cannot merge), so ``from_cache`` never tells one tenant what another asked."""
    scope = "" if tenant is None else tenant.encode("utf-8", "surrogatepass").hex()
    return cache_key("step-back", scope, original)


def make_step_back(deps: Components) -> NodeFn:
    """Build the step-back node bound to ``deps``."""

    async def call_model(
        original: str, tenant: str | None, made: list[str], limit: Deadline
    ) -> str:
        if time_left() <= 0:  # the wait for another replica took the stage's time
            raise DeadlineExceeded("no time left for the model")
        spend = await deps.quota.atry_spend(CHAT_RESOURCE, 1, tenant=tenant)
        if not spend.allowed:
            raise QuotaSpent(spend.reason or "quota", spend.budget)
        made.append(original)
        model = deps.chat_model
        assert model is not None
        messages = [SystemMessage(STEP_BACK_PROMPT), HumanMessage(original)]
        try:
            reply = await ainvoke_chat(model, model, messages, timeout_s=limit.seconds)
            return validate_step_back(original, str(reply.text))
        except (Overloaded, ProviderHung):  # never reached the model: nothing to bill
            made.remove(original)
            await deps.quota.arefund(CHAT_RESOURCE, 1, tenant=tenant)
            raise

    async def step_back(state: RetrievalState) -> dict[str, Any]:
        limit = deadline(deps.policy, deps.policy.deadlines.chat_s, state["turn"]["started_at"])
        if limit.expired:
            record = state["step_back"] | {"status": "skipped", "reason": TURN_DEADLINE}
            return {"step_back": record, "stages": [skipped("step_back", TURN_DEADLINE)]}
        stage = Stage("step_back")
        original = state["rerank_query"]
        record = state["step_back"].copy()
        tenant = state["route"]["tenant"]
        key = step_back_key(original, tenant)
        cached = await deps.cache.aget(key)
        if usable(original, cached):
            record.update(
                {
                    "status": "done",
                    "reason": "from-cache",
                    "generalized": cached,
                    "from_cache": True,
                }
            )
            done = stage.done("from-cache", generalized=cached, from_cache=True, llm_calls=0)
            return {"embed_query": cached, "step_back": record, "stages": [done]}
        if deps.chat_model is None:
            record.update({"status": "skipped", "reason": "no-llm"})
            return {"step_back": record, "stages": [stage.skip("no-llm", llm_calls=0)]}
        made: list[str] = []  # this turn's own model calls; single-flight waiters make none

        try:
            generalized, from_cache = await within(
                deps.cache.aget_or_compute(
                    key,
                    lambda: call_model(original, tenant, made, limit),
                    deps.policy.cache.ttl_s,
                    accept=lambda value: usable(original, value),
                ),
                limit.seconds,
            )
        except QuotaSpent as e:
            record.update({"status": "skipped", "reason": e.reason})
            skip = stage.skip(e.reason, llm_calls=0, **e.detail)
            return {"step_back": record, "stages": [skip]}
        except DeadlineExceeded:
            record.update({"status": "error", "reason": limit.reason})
            return {
                "step_back": record,
                "stages": [stage.error(limit.message(), limit.reason, llm_calls=len(made))],
            }
        except Overloaded:
            record.update({"status": "skipped", "reason": OVERLOADED})
            return {"step_back": record, "stages": [stage.skip(OVERLOADED, llm_calls=0)]}
        except ProviderHung as e:
            record.update({"status": "error", "reason": HUNG})
            return {"step_back": record, "stages": [stage.error(e, HUNG, llm_calls=0)]}
        except StepBackFailed as e:
            record.update({"status": "error", "reason": e.reason})
            return {"step_back": record, "stages": [stage.error(e, e.reason, llm_calls=len(made))]}
        except Exception as e:  # any provider failure: the turn goes on with the original text
            record.update({"status": "error", "reason": "llm-error"})
            return {
                "step_back": record,
                "stages": [stage.error(e, "llm-error", llm_calls=len(made))],
            }
        calls = len(made)
        reason = "from-cache" if from_cache else "generalized"
        record.update(
            {
                "status": "done",
                "reason": reason,
                "generalized": generalized,
                "from_cache": from_cache,
            }
        )
        done = stage.done(reason, generalized=generalized, from_cache=from_cache, llm_calls=calls)
        return {"embed_query": generalized, "step_back": record, "stages": [done]}

    return step_back
