"""What a turn was given: the checked input keys, the query (or the last human message) and the
run context, plus the labels for namespaces and tenants that cannot match anything."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from langchain_core.messages import BaseMessage, HumanMessage, convert_to_messages
from langgraph.config import get_config
from langgraph.runtime import get_runtime

from ragtiller.core.filters import TENANT_KEY
from ragtiller.errors import InputError
from ragtiller.policies.run_context import RunContext, context_from

INPUT_KEYS = ("query", "messages", "namespace", "tenant")
ACCEPTED_SHAPES = (
    '{"query": "your question"} (optionally with "namespace" and "tenant"), or '
    '{"messages": [...]} whose last human message is the question'
)


def check_keys(value: Any) -> None:
    if not isinstance(value, Mapping):
        raise InputError(
            f"graph input must be a dict, got {type(value).__name__}; pass {ACCEPTED_SHAPES}"
        )
    unknown = sorted(str(k) for k in value if k not in INPUT_KEYS)
    if unknown:
        raise InputError(
            f"unknown input key(s) {', '.join(map(repr, unknown))}; pass {ACCEPTED_SHAPES}"
        )
    if "query" in value:
        _check_query(value["query"])
    if "messages" in value:
        if not isinstance(value["messages"], list):
            raise InputError(
                f"input 'messages' must be a list, got {type(value['messages']).__name__}; "
                f"pass {ACCEPTED_SHAPES}"
            )
        _chat_messages(value["messages"])  # before LangGraph's reducer fails on them its own way


def _check_query(query: Any) -> str:
    if not isinstance(query, str):
        raise InputError(
            f"input 'query' must be a str, got {type(query).__name__}: {query!r:.80}; "
            f"pass {ACCEPTED_SHAPES}"
        )
    return query


ANSWER_NAME = "ragtiller"  # the name of the AI message that carries a turn's answer


def answer_text(context: str, no_retrieval_reason: str | None) -> str:
    """A turn's answer in a chat: the context, or why there is none (never empty).

    Example:
        >>> answer_text("", "too-short")
        'No documents retrieved (too-short).'
    """
    return context or f"No documents retrieved ({no_retrieval_reason or 'nothing matched'})."


def answer_id(run_id: str) -> str:
    return f"ragtiller-answer-{run_id}"


def _chat_messages(messages: Any) -> Sequence[BaseMessage]:
    try:
        return convert_to_messages(messages)
    except (ValueError, TypeError, NotImplementedError) as e:  # pydantic's errors are ValueErrors
        raise InputError(f"input 'messages' is not a list of chat messages: {e}") from e


def _last_human(messages: Any) -> str:
    for message in reversed(_chat_messages(messages)):
        if isinstance(message, HumanMessage):
            return message.text
        if (message.id or "").startswith(answer_id("")):
            raise InputError(
                "no new question: the last human message was answered by an earlier turn; "
                f"pass {ACCEPTED_SHAPES}"
            )
    raise InputError(f"input 'messages' holds no human message; pass {ACCEPTED_SHAPES}")


def asked_by(state: Mapping[str, Any]) -> Literal["query", "messages"]:
    return "query" if state.get("query") is not None else "messages"


def query_of(state: Mapping[str, Any]) -> str:
    """``query``, else the last human message of ``messages`` after ragtiller's last answer."""
    query = state.get("query")
    if query is not None:
        return _check_query(query)
    messages = state.get("messages")
    if not messages:
        raise InputError(f"input 'query' is missing; pass {ACCEPTED_SHAPES}")
    return _last_human(messages)


def current_context() -> RunContext:
    try:
        config = get_config()
    except RuntimeError:  # a node function called directly, outside a run
        return RunContext()
    return context_from(getattr(get_runtime(), "context", None), config.get("configurable"))


def unknown_namespace_labels(
    asked: Sequence[str], known: Sequence[str] | None, tenant: str | None
) -> list[str]:
    """A label per asked namespace the index does not hold, naming only what was asked (the
    others may be other tenants'). A tenant's turn gets none: a namespace only another tenant's
    documents fill would go unlabelled, and so tell that it exists."""
    if known is None or tenant is not None:
        return []
    return [f"namespace {name!r} not in the index" for name in asked if name not in known]


def tenant_filter(tenant: str | None) -> dict[str, str] | None:
    return {TENANT_KEY: tenant} if tenant is not None else None


def turn_filter(route: Mapping[str, Any]) -> dict[str, Any] | None:
    """The metadata filter every tier applies: the ``filter`` and tenant of a route or task."""
    merged = {**(route.get("filter") or {}), **(tenant_filter(route["tenant"]) or {})}
    return merged or None


def nothing_matched_labels(tenant: str | None, tier_hits: Mapping[str, list[Any]]) -> list[str]:
    """A label when a tenant's turn found no hit in any tier; it blames the whole scope."""
    if tenant and tier_hits and not any(tier_hits.values()):
        tiers = ", ".join(sorted(tier_hits))
        return [f"no hit in {tiers} within the turn's tenant {tenant!r}, namespaces and filter"]
    return []
