"""The optional LLM router: a chat model reads the query, the deterministic router stays the floor.
A failed call is not refunded (the provider may have billed it); one that never reached the model
(``overloaded``, ``hung``) is."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from dataclasses import replace
from typing import Annotated, Any, Literal

from langchain_core.exceptions import OutputParserException
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import HumanMessage, SystemMessage
from langchain_core.runnables import Runnable
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ragtiller.core.bulkhead import Overloaded, ProviderHung, within
from ragtiller.core.providers import ainvoke_chat, model_label
from ragtiller.core.tiers import CHAT_RESOURCE
from ragtiller.errors import ConfigurationError, describe_error
from ragtiller.policies.evidence import EvalEvidence, read_eval_evidence
from ragtiller.policies.schema import (
    CacheConfig,
    DeadlinesConfig,
    RouteName,
    RouterConfig,
    TriggerKind,
)
from ragtiller.routing.rules import Classification, trigger_kind
from ragtiller.stores import Cache, QuotaLedger, cache_key

logger = logging.getLogger(__name__)

RouterName = Literal["llm", "deterministic"]

MAX_TRIGGERS = 10
MAX_TRIGGER_CHARS = 200

ROUTER_PROMPT = """\
You classify one search query for a document retrieval system. Choose ONE route:
- exact_lexical_lookup: the query names an exact thing a keyword search must match verbatim \
(an identifier, an error message, a ticket or policy id, a quoted phrase, an acronym, a product \
or proper name).
- factual_lookup: a specific factual question without such exact identifiers.
- synthesis: asks to explain, compare or summarise, or is a broad question.
is_broad: true only for a short, general question ("how do I ...", "what is X", "overview of \
...") that background material answers best; never for an exact_lexical_lookup.
triggers: the substrings of the query a keyword search should match verbatim, copied exactly \
from the query; an empty list when there are none.
confidence: how sure you are of the route, from 0 to 1."""


class RouteChoice(BaseModel):
    """The chat model's reading of one query: the structured-output schema."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    route: RouteName = Field(description="The route that best serves the query.")
    is_broad: bool = Field(description="A short, general question (never an exact lookup).")
    triggers: list[Annotated[str, Field(min_length=1, max_length=MAX_TRIGGER_CHARS)]] = Field(
        max_length=MAX_TRIGGERS,
        description="Substrings of the query to match verbatim, copied exactly from the query.",
    )
    confidence: float = Field(ge=0.0, le=1.0, description="Confidence in the route, 0 to 1.")


class _Fallback(Exception):
    """The LLM's answer cannot be used; raised inside the cache computation so nothing is cached."""

    def __init__(self, reason: str, message: str = "", budget: str = "shared") -> None:
        super().__init__(message or reason)
        self.reason = reason
        self.budget = budget


def _coerce(value: object) -> RouteChoice:
    """The structured output (or a cached dict) as a :class:`RouteChoice`, else ``invalid-output``."""
    if isinstance(value, RouteChoice):
        return value
    if isinstance(value, dict):
        try:
            return RouteChoice.model_validate(value)
        except ValidationError as e:
            raise _Fallback("invalid-output", describe_error(e)) from e
    raise _Fallback(
        "invalid-output", f"structured output is {type(value).__name__}, not a RouteChoice"
    )


def _is_choice(value: object) -> bool:  # else the cache entry is a miss
    try:
        _coerce(value)
    except _Fallback:
        return False
    return True


def router_key(model: str, query: str, tenant: str | None = None) -> str:
    """Per tenant (one tenant's reading never routes another's turn) and on the exact text (its
    casing makes an acronym): query and tenant go in as hex, which casefolding cannot merge."""
    exact = (text.encode("utf-8", "surrogatepass").hex() for text in (query, tenant or ""))
    return cache_key("llm-router", ROUTER_PROMPT, model, *exact)


def _reason(error: Exception) -> str:
    if isinstance(error, _Fallback):
        return error.reason
    kinds = ((Overloaded, "overloaded"), (ProviderHung, "hung"), (TimeoutError, "timeout"))
    return next((reason for kind, reason in kinds if isinstance(error, kind)), "llm-error")


class LLMRouter:
    """Route a query with a chat model; every way it cannot answer keeps the deterministic route
    and names why (docs/llm_router.md). One structured-output call per cache miss, no retry."""

    def __init__(
        self,
        config: RouterConfig,
        *,
        chat_model: BaseChatModel | None,
        quota: QuotaLedger,
        cache: Cache,
        trigger_kinds: Iterable[TriggerKind] = tuple(TriggerKind),
        evidence: EvalEvidence | None = None,
        deadlines: DeadlinesConfig | None = None,
        cache_ttl_s: int | None = None,
    ) -> None:
        self.config = config
        limits = deadlines or DeadlinesConfig()
        self.timeout_s = min(limits.chat_s, limits.turn_s)
        self.cache_ttl_s = cache_ttl_s or CacheConfig().ttl_s
        self._model = chat_model
        self.quota = quota
        self.cache = cache
        self.trigger_kinds = frozenset(trigger_kinds)
        self.evidence = evidence
        self.model_label = model_label(chat_model) if chat_model is not None else None
        self._structured: Runnable[LanguageModelInput, Any] | None = None
        if chat_model is not None and (evidence is None or evidence.allowed):
            if CHAT_RESOURCE not in quota.limits:
                raise ConfigurationError(
                    f"the quota ledger has no {CHAT_RESOURCE!r} limit; the LLM router spends "
                    f"the step-back budget: create the ledger with "
                    f"limits={{{CHAT_RESOURCE!r}: <quota.chat_gen_per_day>}}"
                )
            try:
                self._structured = chat_model.with_structured_output(RouteChoice)
            except NotImplementedError as e:
                raise ConfigurationError(
                    f"the LLM router needs a chat model with structured output (tool calling), "
                    f"but {type(chat_model).__name__} does not support with_structured_output; "
                    f"use another model or set router.llm_router: off"
                ) from e

    @property
    def enabled(self) -> bool:  # a model is set and the eval gate allows it
        return self._structured is not None

    async def __call__(
        self, query: str, deterministic: Classification, tenant: str | None = None
    ) -> tuple[Classification, RouterName, dict[str, Any]]:
        """The classification, the router that made it and the manifest's detail; never raises."""
        detail = self._detail(deterministic)
        if deterministic.query_type is None:
            return self._fall_back(deterministic, detail, "no-retrieval")
        if self.evidence is not None and self.evidence.reason is not None:
            detail["note"] = self.evidence.note
            return self._fall_back(deterministic, detail, self.evidence.reason)
        if self._structured is None:
            return self._fall_back(deterministic, detail, "no-llm")
        made: list[str] = []  # this call's own model calls; single-flight waiters make none
        key = router_key(self.model_label or "", query, tenant)
        try:
            raw, from_cache = await within(
                self.cache.aget_or_compute(
                    key, lambda: self._ask(query, tenant, made), self.cache_ttl_s, accept=_is_choice
                ),
                self.timeout_s,
            )
            detail.update(llm_calls=len(made), from_cache=from_cache)
            choice = _coerce(raw)  # a cached entry is re-validated
        except Exception as e:  # any failure: the deterministic route serves the turn
            reason = _reason(e)
            detail["llm_calls"] = len(made)
            if isinstance(e, _Fallback) and e.budget == "tenant":
                detail["quota_budget"] = "tenant"
            if reason in ("quota", "quota-store-unavailable"):
                logger.info("LLM router skipped (%s); using the deterministic route", reason)
                return self._fall_back(deterministic, detail, reason)
            detail["error"] = str(e) if isinstance(e, _Fallback) else describe_error(e)
            logger.warning(
                "LLM router failed (%s); using the deterministic route: %s",
                reason,
                detail["error"],
                exc_info=reason == "llm-error",
            )
            return self._fall_back(deterministic, detail, reason)
        detail.update(confidence=choice.confidence, llm_route=choice.route)
        if choice.confidence < self.config.llm_min_confidence:
            detail["note"] = (
                f"confidence {choice.confidence:.2f} < llm_min_confidence "
                f"{self.config.llm_min_confidence:.2f}"
            )
            return self._fall_back(deterministic, detail, "low-confidence")
        return self._classification(query, deterministic, choice, detail), "llm", detail

    async def _ask(self, query: str, tenant: str | None, made: list[str]) -> dict[str, Any]:
        assert self._structured is not None and self._model is not None
        spend = await self.quota.atry_spend(CHAT_RESOURCE, 1, tenant=tenant)
        if not spend.allowed:
            message = f"no {CHAT_RESOURCE} call left today"
            raise _Fallback(spend.reason or "quota", message, spend.budget)
        made.append(query)
        messages = [SystemMessage(ROUTER_PROMPT), HumanMessage(query)]
        try:
            value = await ainvoke_chat(
                self._model, self._structured, messages, timeout_s=self.timeout_s
            )
        except (ValidationError, OutputParserException) as e:
            raise _Fallback("invalid-output", describe_error(e)) from e
        except (Overloaded, ProviderHung):  # never reached the model: nothing to bill
            made.remove(query)
            await self.quota.arefund(CHAT_RESOURCE, 1, tenant=tenant)
            raise
        return _coerce(value).model_dump(mode="json")

    def _detail(self, deterministic: Classification) -> dict[str, Any]:
        detail: dict[str, Any] = {
            "router": "deterministic",
            "mode": self.config.llm_router,
            "fallback_reason": None,
            "llm_calls": 0,
            "from_cache": False,
            "confidence": None,
            "deterministic_route": deterministic.query_type,
            "llm_route": None,
        }
        if self.model_label is not None:
            detail["model"] = self.model_label
        if self.evidence is not None:
            detail["eval"] = self.evidence.to_json()
        return detail

    @staticmethod
    def _fall_back(
        deterministic: Classification, detail: dict[str, Any], reason: str
    ) -> tuple[Classification, RouterName, dict[str, Any]]:
        detail.update(router="deterministic", fallback_reason=reason)
        return deterministic, "deterministic", detail

    def _classification(
        self, query: str, deterministic: Classification, choice: RouteChoice, detail: dict[str, Any]
    ) -> Classification:
        """The LLM's route and breadth (an exact lookup is never broad); its triggers join the
        deterministic ones when found in the query and of a kind the policy enables."""
        triggers = list(deterministic.triggers)
        dropped: list[str] = []
        for wanted in choice.triggers:
            found = re.search(re.escape(wanted.strip()), query, re.IGNORECASE)
            if found is None or not found.group(0):
                dropped.append(wanted)
                continue
            text = found.group(0)
            kind = trigger_kind(text)
            if kind not in self.trigger_kinds:
                dropped.append(wanted)
            elif not any(text in seen for _, seen in triggers):
                triggers.append((kind, text))
        if dropped:
            detail["triggers_dropped"] = dropped
        detail["router"] = "llm"
        return replace(
            deterministic,
            query_type=choice.route,
            is_broad=choice.is_broad and choice.route != "exact_lexical_lookup",
            triggers=triggers,
            reason=f"llm router: {choice.route} (confidence {choice.confidence:.2f}; "
            f"deterministic: {deterministic.query_type})",
        )


def make_llm_router(config: RouterConfig, **parts: Any) -> LLMRouter | None:
    """None for ``llm_router: off``; for ``evaluated_optional`` a router gated by the eval
    artifact (read once, here), which without a proven lift never calls the model; ``parts``
    are :class:`LLMRouter`'s."""
    if config.llm_router == "off":
        return None
    evidence = None
    if config.llm_router == "evaluated_optional":
        evidence = read_eval_evidence(config.llm_eval_artifact, setting="router.llm_eval_artifact")
        if evidence.reason is not None:
            logger.info("LLM router off (%s): %s", evidence.reason, evidence.note)
    return LLMRouter(config, evidence=evidence, **parts)
