"""The policy's per-turn decisions: pure functions of the route, the query and the quota view,
which the nodes store in the state before each conditional edge (the edges only read them)."""

from __future__ import annotations

from collections.abc import Mapping

from ragtiller.core.tiers import LEXICAL, PARENT_CHILD, Candidate, Hit, TierRole
from ragtiller.core.turn import Decision, QuotaView, RerankDecision
from ragtiller.policies.schema import RetrievalPolicy, RouteConfig, Toggle

EXACT_MATCH_MARGIN = 1.5  # a top BM25 score this many times the next's settles the order


def decision(enabled: bool, setting: Toggle, reason: str) -> Decision:
    return Decision(enabled=enabled, setting=str(setting).lower(), reason=reason)


def decide_hybrid(route: RouteConfig, triggers: list[str]) -> Decision:
    """Lexical tier on when the route says so, or when conditional and a trigger fired."""
    if route.hybrid is True:
        return decision(True, True, "route enables hybrid")
    if route.hybrid is False:
        return decision(False, False, "route disables hybrid")
    if triggers:
        return decision(True, "conditional", f"lexical trigger fired: {triggers[0]}")
    return decision(False, "conditional", "no lexical trigger")


def decide_parent_child(route: RouteConfig, *, is_broad: bool, query_type: str) -> Decision:
    """Parent-child tier (wider context) on when the route says so, or conditional and broad."""
    if route.parent_child is True:
        return decision(True, True, "route enables parent-child")
    if route.parent_child is False:
        return decision(False, False, "route disables parent-child")
    if is_broad or query_type == "synthesis":
        return decision(True, "conditional", "broad or synthesis question wants section context")
    return decision(False, "conditional", "narrow question")


def decide_rerank_setting(route: RouteConfig) -> Decision:
    """Whether the paid ceiling may order this route's passages, before candidates are known."""
    if route.rerank is False:
        return decision(False, False, "route keeps the floor")
    if route.rerank is True:
        return decision(True, True, "route enables the ceiling")
    return decision(True, "conditional", "the ceiling unless an exact match settles it")


def decide_step_back(
    policy: RetrievalPolicy, *, is_broad: bool, has_model: bool, quota: QuotaView
) -> str | None:
    """Why step-back cannot run, or None; all but ``narrow`` and ``disabled`` yield to a cached
    generalization."""
    if not is_broad:
        return "narrow"
    if not policy.step_back.enabled:
        return "disabled"
    if not has_model:
        return "no-llm"
    if not quota["available"]:
        return "quota-store-unavailable"
    if quota["chat_left"] <= 0:
        return "quota"
    return None


def exact_match(lexical_hits: list[Hit], triggers: list[str], margin: float) -> str | None:
    """The trigger token the top BM25 hit holds verbatim when it scores ``margin`` times the next."""
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
    setting: Decision,
    candidates: list[Candidate],
    lexical_hits: list[list[Hit]],
    triggers: list[str],
    policy: RetrievalPolicy,
    *,
    has_ceiling: bool,
    quota: QuotaView,
) -> RerankDecision:
    """The floor whenever there are candidates; the ceiling when the route lets it (conditional:
    unless an exact match settles it), the reranker has one and the quota view shows units left."""
    floor = RerankDecision(enabled=True, setting=setting["setting"], reason="", mode="floor")
    if not candidates:
        return {**floor, "enabled": False, "reason": "no-candidates", "mode": None}
    if not setting["enabled"]:
        return {**floor, "reason": setting["reason"]}
    if setting["setting"] == "conditional":
        tokens = (exact_match(hits, triggers, EXACT_MATCH_MARGIN) for hits in lexical_hits)
        token = next((t for t in tokens if t is not None), None)
        if token is not None:
            return {**floor, "reason": "exact-match", "token": token}
        reason = "conditional: no exact match"
    else:
        reason = setting["reason"]
    affordable = quota["available"] and quota["rerank_left"] > 0
    return {**floor, "reason": reason, "mode": "ceiling" if has_ceiling and affordable else "floor"}


def ceiling_wanted(plan: RerankDecision) -> bool:
    """Whether the route would have the ceiling order this turn (the quota permitting)."""
    return plan["setting"] != "false" and plan["reason"] not in ("exact-match", "no-candidates")


def plan_tiers(
    roles: Mapping[str, TierRole],
    vector_tiers: list[str],
    *,
    has_vector: bool,
    hybrid: bool,
    parent_child: bool,
    weights: Mapping[str, float] | None = None,
) -> tuple[list[str], dict[str, str]]:
    """Which tiers run this turn, and why each other does not. Without a query vector the lexical
    tiers run regardless, so the turn still answers; a tier weighed 0 only fills the tail, so it
    is not searched while another tier is, unless lexical (an exact match reads its hits)."""
    run: list[str] = []
    skipped: dict[str, str] = {}
    for name, role in roles.items():
        if name in vector_tiers and not has_vector:
            skipped[name] = "no-vector"
        elif role == LEXICAL and not hybrid and has_vector:
            skipped[name] = "hybrid-off"
        elif role == PARENT_CHILD and not parent_child:
            skipped[name] = "parent-child-off"
        else:
            run.append(name)
    muted = [n for n in run if (weights or {}).get(n, 1.0) == 0 and roles[n] != LEXICAL]
    if len(muted) < len(run):
        skipped |= {name: "weight-0" for name in muted}
        run = [name for name in run if name not in muted]
    return run, skipped
