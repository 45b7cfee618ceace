"""The optional LLM router: a chat model reads the query, the deterministic router stays the floor.

The deterministic router is the trusted default; an LLM router is an evaluated,
policy-selected strategy and never a foundational dependency. Every way the LLM cannot answer
(no model, no quota, timeout, error, invalid or unsure output, no eval evidence) returns the
deterministic classification unchanged, with the reason in the detail the manifest records.

A call is NOT refunded when it fails: the provider may have billed it (as for step-back); a
call that never reached the model (``overloaded``, ``hung``) is. The model is never run on the
event loop's default executor: a model without native async runs on its own bulkhead, shared
with step-back (:func:`ragtiller.core.providers.ainvoke_chat`).
"""

from __future__ import annotations

import logging
import math
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
from ragtiller.errors import ConfigurationError
from ragtiller.policies.evidence import EvalEvidence, read_eval_evidence
from ragtiller.policies.schema import RouteName, RouterConfig, TriggerKind
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
    """The chat model's reading of one query: the structured-output schema.

    Example:
        >>> RouteChoice(route="synthesis", is_broad=True, triggers=[], confidence=0.8).route
        'synthesis'
    """

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
    """The structured output as a :class:`RouteChoice`.

    Raises:
        _Fallback: ``invalid-output`` when it is not one (or a dict that validates as one).
    """
    if isinstance(value, RouteChoice):
        return value
    if isinstance(value, dict):
        try:
            return RouteChoice.model_validate(value)
        except ValidationError as e:
            raise _Fallback("invalid-output", _describe(e)) from e
    raise _Fallback(
        "invalid-output", f"structured output is {type(value).__name__}, not a RouteChoice"
    )


def _is_choice(value: object) -> bool:
    """Whether a cached value is a route choice (else the cache entry is a miss)."""
    try:
        _coerce(value)
    except _Fallback:
        return False
    return True


def router_key(model: str, query: str, tenant: str | None = None) -> str:
    """The cache key of ``model``'s route choice for ``query`` asked by ``tenant`` (hashed: no
    query text in the store). Per tenant, so one tenant's reading never routes another's turn
    nor shows in its ``from_cache``; on the exact text, as the model read it (its casing makes
    an acronym, its spelling the triggers), so the query and tenant go in as hex, which the
    key's casefolding cannot merge.

    Example:
        >>> router_key("m", "TLS setup", "acme") == router_key("m", "tls setup", "acme")
        False
    """
    exact = (text.encode("utf-8", "surrogatepass").hex() for text in (query, tenant or ""))
    return cache_key("llm-router", ROUTER_PROMPT, model, *exact)


def _describe(error: BaseException) -> str:
    first_line = str(error).strip().splitlines()[0] if str(error).strip() else ""
    return f"{type(error).__name__}: {first_line}" if first_line else type(error).__name__


class LLMRouter:
    """Route a query with a chat model, falling back to the deterministic classification.

    Each call, in this order (the first that applies decides; ``fallback_reason`` names it):

    1. the deterministic router found nothing to retrieve -> kept (``no-retrieval``);
    2. the eval gate refused the LLM router -> ``no-eval-evidence``, ``eval-rejected`` or
       ``eval-artifact-unreadable`` (with ``note``);
    3. no chat model -> ``no-llm``;
    4. the cache, keyed by the turn's tenant, the exact query text, the prompt and the model
       name (:func:`router_key`), kept ``config.cache_ttl_s``: a hit costs nothing
       (``from_cache``), and concurrent identical queries share one call (single-flight); an
       entry that is not a route choice is a miss;
    5. one unit of the ledger's ``chat_gen`` (the step-back budget), and of the turn's
       tenant's own under a per-tenant limit: refused -> ``quota`` (with ``quota_budget:
       tenant`` when the tenant's own ran out), or ``quota-store-unavailable`` when the store
       failed (quotas fail closed);
    6. ONE structured-output call, no retry -> ``llm-error`` (any exception) or
       ``invalid-output`` (not a :class:`RouteChoice`); ``overloaded`` when the model's bulkhead
       had no worker in time, ``hung`` when it refuses a model that keeps hanging (neither
       reached the model: the unit is refunded). Steps 4 to 6 together, the cache's wait for
       another replica included, take at most ``config.llm_timeout_s``, cut to the turn's
       deadline (``turn_s``) -> ``timeout``;
    7. a confidence below ``config.llm_min_confidence`` -> ``low-confidence`` (the answer is
       cached all the same: asking again would cost a call for the same doubt).

    When the LLM's choice is used, the classification takes its route and breadth (an exact
    lookup is never broad) and its reason says so; the triggers are the deterministic ones
    plus each LLM trigger found in the query (spelled as in the query, its kind from
    :func:`trigger_kind`, kept only when the policy enables that kind). LLM triggers not in the
    query, or of a disabled kind, are listed in ``triggers_dropped``.

    The detail always holds ``router``, ``mode``, ``fallback_reason`` (None when the LLM's
    choice is used), ``llm_calls`` (0 or 1: the calls THIS call made), ``from_cache``,
    ``confidence``, ``deterministic_route`` and ``llm_route``; plus ``model``, ``error``,
    ``note``, ``eval`` and ``triggers_dropped`` when they apply.

    Args:
        config: The policy's router section (``llm_min_confidence``, ``llm_timeout_s``,
            ``cache_ttl_s``).
        chat_model: Any LangChain chat model that supports ``with_structured_output``; None
            falls back with ``no-llm``.
        quota: The daily ledger shared with step-back; must have a ``chat_gen`` limit.
        cache: Cache of route choices (shared with step-back and rerank; keys are hashed).
        trigger_kinds: Trigger kinds the policy enables (``policy.lexical_triggers``).
        evidence: The eval gate's outcome; None when no eval is required (``llm_router: on``).
            Evidence that does not allow the router disables it.
        turn_s: The turn's deadline (``deadlines.turn_s``); routing, the first thing a turn
            does, never takes longer. None: only ``config.llm_timeout_s`` bounds it.

    Raises:
        ConfigurationError: The router can call the model but ``quota`` has no ``chat_gen``
            limit, or ``chat_model`` does not support ``with_structured_output``.

    Example:
        >>> import asyncio
        >>> from ragtiller import load_policy
        >>> from ragtiller.routing.rules import classify
        >>> from ragtiller.stores import MemoryCache, MemoryQuotaLedger
        >>> router = LLMRouter(RouterConfig(llm_router="on"), chat_model=None,
        ...                    quota=MemoryQuotaLedger({"chat_gen": 20}), cache=MemoryCache())
        >>> query = "which port does the server listen on"
        >>> cls, name, detail = asyncio.run(router(query, classify(query, load_policy())))
        >>> cls.query_type, name, detail["fallback_reason"], detail["llm_calls"]
        ('factual_lookup', 'deterministic', 'no-llm', 0)
    """

    def __init__(
        self,
        config: RouterConfig,
        *,
        chat_model: BaseChatModel | None,
        quota: QuotaLedger,
        cache: Cache,
        trigger_kinds: Iterable[TriggerKind] = tuple(TriggerKind),
        evidence: EvalEvidence | None = None,
        turn_s: float | None = None,
    ) -> None:
        self.config = config
        self.timeout_s = min(config.llm_timeout_s, math.inf if turn_s is None else turn_s)
        """The longest one routing takes."""
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
    def enabled(self) -> bool:
        """Whether a call can reach the model (a model is set and the eval gate allows it)."""
        return self._structured is not None

    async def __call__(
        self, query: str, deterministic: Classification, tenant: str | None = None
    ) -> tuple[Classification, RouterName, dict[str, Any]]:
        """Classify ``query``; never raises for a model, quota or cache problem.

        Args:
            query: The query, already truncated to the policy's ``max_query_chars``.
            deterministic: The deterministic router's classification of ``query``.
            tenant: The turn's tenant: its cache entries are its own.

        Returns:
            The classification to use, the router that made it, and the detail for the manifest.
        """
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
                    key,
                    lambda: self._ask(query, tenant, made),
                    self.config.cache_ttl_s,
                    accept=_is_choice,
                ),
                self.timeout_s,
            )
        except _Fallback as e:
            return self._failed(deterministic, detail, made, e.reason, e)
        except Overloaded as e:
            return self._failed(deterministic, detail, made, "overloaded", e)
        except ProviderHung as e:
            return self._failed(deterministic, detail, made, "hung", e)
        except TimeoutError as e:
            return self._failed(deterministic, detail, made, "timeout", e)
        except Exception as e:  # any provider failure: the deterministic route serves the turn
            return self._failed(deterministic, detail, made, "llm-error", e)
        detail.update(llm_calls=len(made), from_cache=from_cache)
        try:
            choice = _coerce(raw)  # a cached entry is re-validated
        except _Fallback as e:
            return self._failed(deterministic, detail, made, e.reason, e)
        detail.update(confidence=choice.confidence, llm_route=choice.route)
        if choice.confidence < self.config.llm_min_confidence:
            detail["note"] = (
                f"confidence {choice.confidence:.2f} < llm_min_confidence "
                f"{self.config.llm_min_confidence:.2f}"
            )
            return self._fall_back(deterministic, detail, "low-confidence")
        return self._classification(query, deterministic, choice, detail), "llm", detail

    async def _ask(self, query: str, tenant: str | None, made: list[str]) -> dict[str, Any]:
        """Spend one unit (of ``tenant``'s too, under a per-tenant limit) and ask the model
        once; return the choice as JSON-ready data."""
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
            raise _Fallback("invalid-output", _describe(e)) from e
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

    def _failed(
        self,
        deterministic: Classification,
        detail: dict[str, Any],
        made: list[str],
        reason: str,
        error: BaseException,
    ) -> tuple[Classification, RouterName, dict[str, Any]]:
        detail["llm_calls"] = len(made)
        if isinstance(error, _Fallback) and error.budget == "tenant":
            detail["quota_budget"] = "tenant"
        if reason in ("quota", "quota-store-unavailable"):
            logger.info("LLM router skipped (%s); using the deterministic route", reason)
        else:
            detail["error"] = str(error) if isinstance(error, _Fallback) else _describe(error)
            logger.warning(
                "LLM router failed (%s); using the deterministic route: %s",
                reason,
                detail["error"],
                exc_info=reason == "llm-error",
            )
        return self._fall_back(deterministic, detail, reason)

    def _classification(
        self,
        query: str,
        deterministic: Classification,
        choice: RouteChoice,
        detail: dict[str, Any],
    ) -> Classification:
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
        is_broad = choice.is_broad and choice.route != "exact_lexical_lookup"
        reason = (
            f"llm router: {choice.route} (confidence {choice.confidence:.2f}; "
            f"deterministic: {deterministic.query_type})"
        )
        detail["router"] = "llm"
        return replace(
            deterministic,
            query_type=choice.route,
            is_broad=is_broad,
            triggers=triggers,
            reason=reason,
        )


def make_llm_router(
    config: RouterConfig,
    *,
    chat_model: BaseChatModel | None,
    quota: QuotaLedger,
    cache: Cache,
    trigger_kinds: Iterable[TriggerKind] = tuple(TriggerKind),
    turn_s: float | None = None,
) -> LLMRouter | None:
    """The router strategy the policy selects (``router.llm_router``).

    * ``off``: None; the gate uses the deterministic router alone.
    * ``on``: an :class:`LLMRouter` (without a chat model every call falls back with ``no-llm``).
    * ``evaluated_optional``: an :class:`LLMRouter` gated by ``config.llm_eval_artifact`` (see
      :func:`read_eval_evidence`, read once, here). Without a proven lift the router never
      calls the model and every turn's detail says why (``no-eval-evidence``,
      ``eval-rejected`` or ``eval-artifact-unreadable``, with a ``note``).

    Args:
        config: The policy's router section.
        chat_model: Any LangChain chat model with structured output, or None.
        quota: The daily ledger shared with step-back (needs a ``chat_gen`` limit).
        cache: The route-choice cache.
        trigger_kinds: Trigger kinds the policy enables (``policy.lexical_triggers``).
        turn_s: The turn's deadline; see :class:`LLMRouter`.

    Returns:
        The router, or None when the policy turns it off.

    Raises:
        ConfigurationError: See :class:`LLMRouter`.

    Example:
        >>> from ragtiller.stores import MemoryCache, MemoryQuotaLedger
        >>> stores = {"quota": MemoryQuotaLedger({"chat_gen": 20}), "cache": MemoryCache()}
        >>> make_llm_router(RouterConfig(llm_router="off"), chat_model=None, **stores) is None
        True
        >>> router = make_llm_router(
        ...     RouterConfig(llm_router="evaluated_optional"), chat_model=None, **stores
        ... )
        >>> router.evidence.reason
        'no-eval-evidence'
    """
    if config.llm_router == "off":
        return None
    evidence = None
    if config.llm_router == "evaluated_optional":
        evidence = read_eval_evidence(config.llm_eval_artifact, setting="router.llm_eval_artifact")
        if evidence.reason is not None:
            logger.info("LLM router off (%s): %s", evidence.reason, evidence.note)
    return LLMRouter(
        config,
        chat_model=chat_model,
        quota=quota,
        cache=cache,
        trigger_kinds=trigger_kinds,
        evidence=evidence,
        turn_s=turn_s,
    )
