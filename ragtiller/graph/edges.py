"""Edge decisions. Each is a pure function of state and policy, made by the node BEFORE the edge.

That node stores the decision in the state and announces any stage it skips, so the event
stream always lists all seven stages in order; the router functions at the bottom only read the
stored decision and return a ``Literal`` so the drawn graph is right.
"""

from __future__ import annotations

from typing import Any, Literal

from langgraph.types import Send

from ragtiller.policies.schema import RetrievalPolicy, RouteConfig, Toggle
from ragtiller.types import Candidate, Hit

LEXICAL = "lexical"
PARENT_CHILD = "parent_child"


def decision(enabled: bool, setting: Toggle, reason: str) -> dict[str, Any]:
    """A switch's outcome, in the shape the manifest records."""
    return {"enabled": enabled, "setting": str(setting).lower(), "reason": reason}


def decide_hybrid(route: RouteConfig, triggers: list[str]) -> dict[str, Any]:
    """Lexical tier on when the route says so, or when conditional and a trigger fired."""
    if route.hybrid is True:
        return decision(True, True, "route enables hybrid")
    if route.hybrid is False:
        return decision(False, False, "route disables hybrid")
    if triggers:
        return decision(True, "conditional", f"lexical trigger fired: {triggers[0]}")
    return decision(False, "conditional", "no lexical trigger")


def decide_fusion(route: RouteConfig, *, is_broad: bool, query_type: str) -> dict[str, Any]:
    """Parent-child tier (wider context) on when the route says so, or conditional and broad."""
    if route.fusion is True:
        return decision(True, True, "route enables fusion")
    if route.fusion is False:
        return decision(False, False, "route disables fusion")
    if is_broad or query_type == "synthesis":
        return decision(True, "conditional", "broad or synthesis question wants section context")
    return decision(False, "conditional", "narrow question")


def decide_rerank_setting(route: RouteConfig) -> dict[str, Any]:
    """The route's rerank switch before candidates are known (refined by :func:`decide_rerank`)."""
    if route.rerank is False:
        return decision(False, False, "route disables rerank")
    if route.rerank is True:
        return decision(True, True, "route enables rerank")
    return decision(True, "conditional", "rerank unless an exact match settles it")


def exact_match(lexical_hits: list[Hit], triggers: list[str], margin: float) -> str | None:
    """The trigger token that an exact sparse match confidently answers, or None.

    Confident means: the top BM25 hit's score is at least ``margin`` times the next hit's
    (or it is the only hit), and its text contains the trigger token verbatim.
    """
    if not lexical_hits or not triggers:
        return None
    top = lexical_hits[0]
    runner_up = lexical_hits[1]["score"] if len(lexical_hits) > 1 else 0.0
    if top["score"] <= 0 or (runner_up > 0 and top["score"] < margin * runner_up):
        return None
    for label in triggers:
        token = label.split(":", 1)[1].strip("\"'`“”")
        if token and token in top["text"]:
            return token
    return None


def decide_rerank(
    setting: dict[str, Any],
    candidates: list[Candidate],
    tier_hits: dict[str, list[Hit]],
    triggers: list[str],
    policy: RetrievalPolicy,
) -> dict[str, Any]:
    """Run rerank or skip it: ``no-candidates``, ``disabled`` or ``exact-match``."""
    if not candidates:
        return {**setting, "enabled": False, "reason": "no-candidates"}
    if not setting["enabled"]:
        return {**setting, "reason": "disabled"}
    if setting["setting"] == "conditional":
        token = exact_match(
            tier_hits.get(LEXICAL, []), triggers, policy.reranker.exact_match_margin
        )
        if token is not None:
            return {**setting, "enabled": False, "reason": "exact-match", "token": token}
    return {
        **setting,
        "reason": setting["reason"]
        if setting["setting"] != "conditional"
        else "conditional: no exact match",
    }


def plan_tiers(
    tier_names: list[str],
    vector_tiers: list[str],
    *,
    has_vector: bool,
    hybrid: bool,
    fusion: bool,
) -> tuple[list[str], dict[str, str]]:
    """Which tiers run this turn, and why each other tier does not.

    Returns:
        Tiers to run, and a reason per skipped tier (``hybrid-off``, ``fusion-off``,
        ``no-vector``). When the query could not be embedded the lexical tier runs regardless,
        so the turn still answers.
    """
    run: list[str] = []
    skipped: dict[str, str] = {}
    for name in tier_names:
        if name in vector_tiers and not has_vector:
            skipped[name] = "no-vector"
        elif name == LEXICAL and not hybrid and has_vector:
            skipped[name] = "hybrid-off"
        elif name == PARENT_CHILD and not fusion:
            skipped[name] = "fusion-off"
        else:
            run.append(name)
    return run, skipped


# --- router functions: read the stored decision, return where to go -----------------------


def after_gate(state: dict[str, Any]) -> Literal["step_back", "embed", "assemble"]:
    """No retrieval -> assemble; broad and step-back enabled -> step_back; else embed."""
    route = state["route"]
    if route["query_type"] == "no_retrieval":
        return "assemble"
    if state.get("step_back", {}).get("status") == "active":
        return "step_back"
    return "embed"


def after_embed(state: dict[str, Any]) -> list[Send] | Literal["fuse"]:
    """One ``Send`` per planned tier (they run in parallel), or straight to fuse when none."""
    tasks = state.get("tier_tasks") or []
    if not tasks:
        return "fuse"
    return [Send("tier_search", task) for task in tasks]


def after_fuse(state: dict[str, Any]) -> Literal["rerank", "assemble"]:
    """Rerank when the fuse node's decision says so."""
    return "rerank" if state["rerank_decision"]["enabled"] else "assemble"
