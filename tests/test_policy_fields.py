"""Every policy field changes something a caller can see, and says when it applies.

One table row per leaf field: the field, a new value, the base it is changed from (a few
fields matter only beside another, e.g. ``fusion.rrf_k`` with ``method: rrf``), the turns to
run, the parts the graph is built with, and what to compare. Both graphs are built by
``build_graph`` over one small real index (hashing embedder, five documents, two namespaces);
the test fails when what the row compares is the same: by default the documents and context a
caller gets, else the manifest or stage record where the effect shows (a label, a quota, an
LLM call), never an echo of the field itself. So a field nothing reads, or whose reads were
renamed away, cannot ship. ``quota.timezone`` is compared on the ledger the graph built; the
``promotion`` rules on ``decide``.

The ``applies`` tag is held to the same standard: a run context's policy that changes a
``turn`` field must turn exactly as a graph built with it, and one that changes a ``build``
field must be refused (or, for the tier options, get tiers rebuilt for it).
"""

from __future__ import annotations

import asyncio
import time
import typing
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from fixtures.cohere_stub import CohereStub
from fixtures.fakes import ScriptedChatModel, StaticTier, SyncChatModel
from fixtures.pinecone_emulator import API_KEY, PineconeEmulator
from langchain_core.documents import Document
from pydantic import BaseModel

from ragtiller import RunManifest, build_graph, load_policy
from ragtiller.core.tiers import Candidate, Hit, SearchRequest
from ragtiller.errors import InputError
from ragtiller.eval import EvalRun, QueryResult, compare_runs, decide, load_beir, promotion
from ragtiller.eval.variants import with_overrides
from ragtiller.graph import tiers_for_policy
from ragtiller.graph.builder import build_components, default_stores
from ragtiller.graph.per_run import fixed_changes
from ragtiller.index import EmbeddedIndex
from ragtiller.ingest import build_index
from ragtiller.models import HashingEmbedder
from ragtiller.policies.fields import fields_table
from ragtiller.policies.loader import parse_policy
from ragtiller.policies.schema import PromotionConfig, RetrievalPolicy, RouteConfig
from ragtiller.rerankers import CohereReranker, RerankResult, ZScoreReranker, reranker_from_policy
from ragtiller.stores import MemoryCache

FACTUAL = "which damping do thin supersonic plates have"
"""A factual lookup (no trigger, no synthesis words)."""
FACTUALS = tuple(
    f"which {what} do thin supersonic plates have"
    for what in ("damping", "limits", "curvature", "stiffness", "thickness", "modes")
)
"""Six factual lookups: the rerank ceiling's p95 latency is known after five calls."""
SYNTHESIS = "explain why wing flutter margins shrink with speed"
MARGINS = "explain why stiffness falls as margins of flutter shrink"
"""A synthesis question whose best child has neighbours in its section."""
HEATING = "explain why radiation cools the skin as the nose heats"
"""A synthesis question whose feedback documents hold a paragraph cut into several passages."""
BROAD = "what is flutter?"
"""Broad: step-back may generalise it."""
TICKET = "TICKET-1234 flutter log"
"""A strong trigger: the exact lexical route."""
EXTRA_ONLY = "which vault records are kept for flutter tests"
"""Words only the ``extra`` namespace holds."""

TEXTS = {
    "wing.md": "# Wing flutter\n\nFlutter of a swept wing grows with speed; flutter margins "
    "shrink as the wing bends and twists.\n\n## Margins\n\n"
    + "\n\n".join(
        f"Margins of flutter shrink at high speed, case {n}: " + "stiffness falls " * 40
        for n in range(4)
    )
    + "\n\nThe flutter test log is TICKET-1234, kept with the wind tunnel records.",
    "panel.md": "# Panel flutter\n\nSupersonic panel flutter of thin plates and its damping: "
    "structural damping of thin plates is small.\n\n## Plates\n\nThin plates flutter when the "
    "dynamic pressure passes a limit.\n\nCurvature raises the limit of a thin plate.",
    "heat.md": "# Heat transfer\n\nStagnation heat transfer in hypersonic flow at the nose "
    "grows with speed.\n\n## Nose\n\nA blunt nose lowers the heat transfer rate.\n\n"
    + "Nose heating, a paragraph ingest cuts into passages: "
    + "the nose heats " * 70
    + "radiation cools the skin " * 40,
    "boundary.md": "# Boundary layers\n\nLaminar boundary layer transition on a flat plate "
    "depends on speed and roughness.\n\n## Roughness\n\nRoughness trips the boundary layer.",
}
EXTRA = {
    "vault.md": "# Vault records\n\nThe vault keeps the records of every flutter test, "
    "with the damping of each plate."
}
TINY = Path(__file__).parent / "data" / "tiny_beir"
DOC = Path(__file__).resolve().parents[1] / "docs" / "policy.md"


@pytest.fixture(scope="module")
def index() -> EmbeddedIndex:
    docs = [Document(page_content=t, metadata={"source": s}) for s, t in TEXTS.items()]
    docs += [
        Document(page_content=t, metadata={"source": s, "namespace": "extra"})
        for s, t in EXTRA.items()
    ]
    return build_index(docs, embedder=HashingEmbedder(dim=64), progress=False)


class Clock:
    """A monotonic clock the test moves: cache entries expire only when it says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class World:
    """What a row's parts are made of: a clock, the Cohere stub, the Pinecone emulators."""

    clock: Clock
    index: EmbeddedIndex
    cohere_url: str
    dense_host: str
    sparse_host: str


Parts = Callable[[RetrievalPolicy, World], dict[str, Any]]


def plain(policy: RetrievalPolicy, world: World) -> dict[str, Any]:
    return {}


def router_model(policy: RetrievalPolicy, world: World, **model: Any) -> dict[str, Any]:
    return {"chat_model": SyncChatModel(**model), "cache": MemoryCache(clock=world.clock)}


def step_back_model(policy: RetrievalPolicy, world: World, **model: Any) -> dict[str, Any]:
    return {"chat_model": ScriptedChatModel(**model), "cache": MemoryCache(clock=world.clock)}


def cohere_ceiling(policy: RetrievalPolicy, world: World) -> dict[str, Any]:
    """The reranker the policy's section makes (``reranker_from_policy``, as ``build_graph``
    does), over a Cohere client pointed at the loopback stub instead of Cohere's API."""
    quota, _ = default_stores(policy)
    cache = MemoryCache(clock=world.clock)
    cohere = CohereReranker(api_key="stub-key-0123456789", base_url=world.cohere_url, env={})
    reranker = reranker_from_policy(
        policy.reranker, ledger=quota, cache=cache, cohere=cohere, cache_ttl_s=policy.cache.ttl_s
    )
    return {"quota": quota, "cache": cache, "reranker": reranker}


class SlowTier(StaticTier):
    """A tier whose blocking search takes 0.25 s and finds nothing."""

    def search(self, request: SearchRequest) -> list[Hit]:
        time.sleep(0.25)
        return super().search(request)


def slow_tier(policy: RetrievalPolicy, world: World) -> dict[str, Any]:
    return {"tiers": [*tiers_for_policy(policy, world.index), SlowTier("slow", [])]}


class SlowReranker(ZScoreReranker):
    """The z-score floor, 0.25 s late."""

    async def arerank(
        self, query: str, candidates: Sequence[Candidate], top_n: int
    ) -> RerankResult:
        await asyncio.sleep(0.25)
        return await super().arerank(query, candidates, top_n)


def slow_reranker(policy: RetrievalPolicy, world: World) -> dict[str, Any]:
    return {"reranker": SlowReranker()}


@dataclass(frozen=True)
class Row:
    """One field's change and how to see it."""

    path: str
    value: Any
    turns: Sequence[str | float | Mapping[str, str]] = (FACTUAL,)
    """Queries (or whole inputs) run in order on one graph; a number moves the clock that many
    seconds."""
    base: Mapping[str, Any] = field(default_factory=dict)
    parts: Parts = plain
    env: Mapping[str, str] = field(default_factory=dict)
    """Environment for the build (``{dense}`` / ``{sparse}``: the emulators' hosts)."""
    emulator: str = ""
    """``outage``: the Pinecone emulators answer 429."""
    see: Sequence[str] = ("documents", "context")
    """What to compare of each turn (dotted keys of :func:`outcome`): by default what the
    caller gets. Never a mere echo of the field (``manifest.fusion_method``, the cap in a
    stage's detail): the field's effect."""
    parts_only: Callable[[Any], Any] | None = None
    """For a build field whose effect is on the built parts: what to compare of them."""


RERANK = {"routes.factual_lookup.rerank": True}
RRF = {"fusion.method": "rrf"}
CEILING = {**RERANK, "reranker.ceiling": "cohere", "reranker.require_eval_lift": False}
ROUTER = {"router.llm_router": "on"}
DENSE_PINECONE = {"dense_backend.provider": "pinecone"}
SPARSE_PINECONE = {"lexical_backend.provider": "pinecone"}
PINECONE_ENV = {
    "PINECONE_API_KEY": API_KEY,
    "PINECONE_HOST": "{dense}",
    "PINECONE_SPARSE_HOST": "{sparse}",
}
WINDOWS = {"fusion.tier_weights": {"dense": 0.0, "lexical": 0.0, "parent_child": 1.0}}
"""Passages of the parent-child tier alone: its windows are what a turn returns."""
WEIGHED_WINDOWS = {"fusion.tier_weights": {"dense": 1.0, "lexical": 1.0, "parent_child": 1.0}}
"""The parent-child tier weighed: at weight 0 (the default) it is not searched at all."""
SMALL_CAP = {
    "budgets.max_chunks": 2,
    "budgets.candidate_multiplier": 1,
    "budgets.candidate_floor": 3,
    "feedback.dense_weight": 0.0,
}
"""A candidate cap (3) below the corpus's chunks, so each tier's hits show the cap (feedback
off: its first pass asks each tier for 100 hits at least)."""

HITS = ("manifest.tiers",)
"""Each tier's hits (ids and scores)."""
LABELS = ("manifest.degraded",)
CALLS = ("manifest.llm_calls",)

ROWS = [
    Row("policy_id", "another-policy", see=("manifest.policy_id",)),
    Row("version", "another-version", see=("manifest.policy_version",)),
    Row("routes.factual_lookup.namespace", ["default", "extra"], turns=(EXTRA_ONLY,)),
    Row("routes.factual_lookup.top_k", 1),
    Row("routes.factual_lookup.hybrid", False),
    Row("routes.factual_lookup.parent_child", False, base=WEIGHED_WINDOWS, see=HITS),
    Row(  # the route lets the paid ceiling order it
        "routes.factual_lookup.rerank",
        True,
        base={"reranker.ceiling": "cohere", "reranker.require_eval_lift": False},
        parts=cohere_ceiling,
    ),
    Row("router.min_query_chars", 4, turns=("flutter",)),  # 7 characters: searched at 4
    Row("router.llm_router", "on", parts=router_model),
    Row(
        "router.llm_eval_artifact",
        "no-such-decision.json",
        base={"router.llm_router": "evaluated_optional"},
        parts=router_model,
        see=LABELS,
    ),
    Row("router.llm_min_confidence", 0.95, base=ROUTER, parts=router_model),
    Row(  # one TTL for every cached model answer: the route choice's
        "cache.ttl_s",
        60,
        turns=(FACTUAL, 600.0, FACTUAL),
        base=ROUTER,
        parts=router_model,
        see=CALLS,
    ),
    Row("lexical_triggers", [], turns=(TICKET,)),
    Row("step_back.enabled", False, turns=(BROAD,), parts=step_back_model),
    Row("cache.ttl_s", 60, turns=(BROAD, 600.0, BROAD), parts=step_back_model, see=CALLS),
    Row("quota.chat_gen_per_day", 0, turns=(BROAD,), parts=step_back_model),
    Row(
        "quota.chat_gen_per_tenant_per_day",
        0,
        turns=({"query": BROAD, "tenant": "acme"},),  # a tenant's turn: no other has a budget
        parts=step_back_model,
        see=("manifest.step_back", "manifest.quota_remaining", *LABELS),
    ),
    Row(
        "quota.timezone",
        "Pacific/Kiritimati",  # UTC+14; the base is UTC-11: never the same calendar day
        base={"quota.timezone": "Pacific/Pago_Pago"},
        parts_only=lambda deps: deps.quota.window().id,
    ),
    Row("reranker.provider", "identity", base={**RERANK, **RRF}),
    Row("reranker.ceiling", "cohere", base=RERANK, see=("manifest.rerank_detail",)),
    Row(
        "reranker.require_eval_lift",
        False,
        base={**RERANK, "reranker.ceiling": "cohere"},
        see=LABELS,
    ),
    Row(
        "reranker.ceiling_eval_artifact",
        "no-such-decision.json",
        base={**RERANK, "reranker.ceiling": "cohere"},
        see=("manifest.rerank_detail.ceiling_note",),
    ),
    Row(
        "reranker.max_p95_latency_ms_added",
        0.001,
        turns=FACTUALS,
        base={**CEILING, "reranker.max_p95_latency_ms_added": 60_000.0},  # a cold start is slow
        parts=cohere_ceiling,
    ),
    Row(
        "reranker.cost_usd_per_call",
        0.005,
        base=CEILING,
        parts=cohere_ceiling,
        see=("manifest.cost_usd",),
    ),
    Row("reranker.daily_calls", 0, base=CEILING, parts=cohere_ceiling),
    Row(  # the ceiling's order
        "cache.ttl_s",
        60,
        turns=(FACTUAL, 120.0, FACTUAL),
        base=CEILING,
        parts=cohere_ceiling,
        see=("manifest.quota_remaining",),
    ),
    Row("budgets.max_chunks", 2, turns=(SYNTHESIS,)),
    Row("budgets.passages_per_document", 1, turns=(SYNTHESIS,)),
    Row("budgets.context_words", 20, turns=(SYNTHESIS,)),
    Row("budgets.outline_words", 0, turns=(BROAD,)),
    Row("budgets.window_words", 10, turns=(MARGINS,), base=WINDOWS),
    Row("budgets.candidate_multiplier", 5, base=SMALL_CAP, see=HITS),
    Row("budgets.candidate_floor", 10, base=SMALL_CAP, see=HITS),
    Row("budgets.max_query_chars", 12),
    Row("fusion.method", "rrf"),
    Row("fusion.rrf_k", 1, base={"fusion.method": "rrf"}),
    Row("fusion.tier_weights", {"dense": 1.0, "lexical": 0.0, "parent_child": 0.0}),
    Row("deadlines.embed_s", 1e-9),
    Row("deadlines.tier_s", 0.05, parts=slow_tier, see=LABELS),  # the slow tier finds nothing
    Row("deadlines.rerank_s", 0.05, base=RERANK, parts=slow_reranker),
    Row(
        "deadlines.chat_s",
        0.05,
        turns=(BROAD,),
        parts=lambda p, w: step_back_model(p, w, delay_s=0.25),
    ),
    Row("deadlines.turn_s", 1e-9),
    Row("dense_backend.provider", "pinecone"),
    Row("dense_backend.fallback", "none", base=DENSE_PINECONE),
    Row(
        "dense_backend.fallback_on_outage",
        True,
        base=DENSE_PINECONE,
        env=PINECONE_ENV,
        emulator="outage",
    ),
    Row("lexical_backend.provider", "pinecone"),
    Row("lexical_backend.fallback", "none", base=SPARSE_PINECONE),
    Row(
        "lexical_backend.fallback_on_outage",
        True,
        base=SPARSE_PINECONE,
        env=PINECONE_ENV,
        emulator="outage",
    ),
    Row("feedback.dense_weight", 0.0),
    Row("feedback.dense_docs", 1),
    Row("feedback.dense_weight", 0.1),
    Row(
        "dense_backend.search",
        "approximate",
        parts_only=lambda deps: [getattr(t, "approximate", None) for t in deps.tiers.values()],
    ),
]

ROW_IDS = [r.path + "".join(f"@{k}={v}" for k, v in r.base.items()) for r in ROWS]
"""Each row's id: its field, and the base it changes when that is not the default."""

VOLATILE = frozenset({"ms", "latency_ms", "run_id", "created_at", "latency_p95_ms", "ceiling_ms"})
"""Timings and ids: they differ between any two runs, so they never count as a change."""


def scrub(value: Any, drop: frozenset[str] = VOLATILE) -> Any:
    if isinstance(value, Mapping):
        return {k: scrub(v, drop) for k, v in value.items() if k not in drop}
    if isinstance(value, list | tuple):
        return [scrub(v, drop) for v in value]
    return value


def pick(value: Any, dotted: str) -> Any:
    for key in dotted.split("."):
        value = value[key]
    return value


def outcome(out: Mapping[str, Any]) -> dict[str, Any]:
    """What a caller sees of one turn: documents, context, manifest, stage records."""
    manifest: RunManifest = out["manifest"]
    return {
        "documents": [[d.id, d.page_content, d.metadata] for d in out["documents"]],
        "context": out["context"],
        "manifest": manifest.model_dump(mode="json"),
        "stages": list(out["stages"]),
    }


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[CohereStub, PineconeEmulator, PineconeEmulator]]:
    with (
        CohereStub() as cohere,
        PineconeEmulator(dimension=64) as dense,
        PineconeEmulator(dimension=None) as sparse,
    ):
        yield cohere, dense, sparse


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ("REDIS_URL", "COHERE_API_KEY", "RAGTILLER_POLICY_DIR", *PINECONE_ENV):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


class Observer:
    """Builds a row's graph for a policy and runs the row's turns on it."""

    def __init__(
        self,
        row: Row,
        index: EmbeddedIndex,
        servers: tuple[CohereStub, PineconeEmulator, PineconeEmulator],
        env: pytest.MonkeyPatch,
    ) -> None:
        self.row, self.index = row, index
        cohere, self.dense, self.sparse = servers
        self.urls = (cohere.url, self.dense.host, self.sparse.host)
        for name, value in row.env.items():
            env.setenv(name, value.format(dense=self.dense.host, sparse=self.sparse.host))
        for emulator in (self.dense, self.sparse):
            if row.emulator == "outage":
                emulator.fail(429)

    def effect(self, policy: RetrievalPolicy) -> Any:
        """What the row compares of its turns on a graph built with ``policy``."""
        seen = self(policy)
        if self.row.parts_only is not None:
            return seen
        return [{key: pick(turn, key) for key in self.row.see} for turn in seen]

    def heal(self) -> None:
        self.dense.heal()
        self.sparse.heal()

    def graph(self, policy: RetrievalPolicy) -> Any:
        parts = self.row.parts(policy, World(Clock(), self.index, *self.urls))
        return build_graph(policy, index=self.index, **parts)

    def __call__(self, policy: RetrievalPolicy, context: Mapping[str, Any] | None = None) -> Any:
        """The row's turns on a graph built with ``policy`` (and run ``context``)."""
        world = World(Clock(), self.index, *self.urls)
        parts = self.row.parts(policy, world)
        if self.row.parts_only is not None:
            return self.row.parts_only(build_components(policy, index=self.index, **parts))
        graph = build_graph(policy, index=self.index, **parts)
        seen = []
        for turn in self.row.turns:
            if isinstance(turn, float):
                world.clock.now += turn
                continue
            asked = dict(turn) if isinstance(turn, Mapping) else {"query": turn}
            out = graph.invoke(asked, context=dict(context) if context else None)
            seen.append(scrub(outcome(out)))
        return seen


@pytest.fixture
def observer(
    request: pytest.FixtureRequest,
    index: EmbeddedIndex,
    servers: tuple[CohereStub, PineconeEmulator, PineconeEmulator],
    clean_env: pytest.MonkeyPatch,
) -> Iterator[Observer]:
    watch = Observer(request.param, index, servers, clean_env)
    yield watch
    watch.heal()


def value_at(policy: RetrievalPolicy, path: str) -> Any:
    return pick(policy.model_dump(mode="json"), path)


def policies(row: Row) -> tuple[RetrievalPolicy, RetrievalPolicy]:
    base = with_overrides(load_policy(), row.base)
    changed = with_overrides(base, {row.path: row.value})
    assert value_at(changed, row.path) != value_at(base, row.path), f"{row.path}: no change"
    return base, changed


@pytest.mark.parametrize("observer", ROWS, ids=ROW_IDS, indirect=True)
def test_changing_the_field_changes_what_the_graph_shows(observer: Observer) -> None:
    row = observer.row
    base, changed = policies(row)
    seen = observer.effect(base)
    assert observer.effect(base) == seen, "two base runs differ: the comparison would prove nothing"
    assert observer.effect(changed) != seen, (
        f"{row.path}: {value_at(base, row.path)!r} -> {row.value!r} changed nothing observable"
    )


# --- the applies tag tells the truth ---------------------------------------------------------

REBUILT = ("fusion.", "feedback.", "budgets.window_words")
"""Build fields a run policy may change all the same: the graph rebuilds the tiers for it."""


def leaves(model: type[BaseModel], prefix: str = "") -> dict[str, Any]:
    """Every leaf field by dotted path; a route's fields as ``routes.*.<field>``."""
    found: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        annotation = info.annotation
        if name == "routes":
            found |= leaves(RouteConfig, "routes.*.")
        elif isinstance(annotation, type) and issubclass(annotation, BaseModel):
            found |= leaves(annotation, f"{prefix}{name}.")
        else:
            found[f"{prefix}{name}"] = info
    return found


LEAVES = leaves(RetrievalPolicy)


def leaf_of(path: str) -> str:
    parts = path.split(".")
    return ".".join(["routes", "*", *parts[2:]]) if parts[0] == "routes" else path


def applies(path: str) -> str:
    extra = LEAVES[leaf_of(path)].json_schema_extra or {}
    return str(extra.get("applies"))


@pytest.mark.parametrize("observer", ROWS, ids=ROW_IDS, indirect=True)
def test_a_run_policy_changes_a_turn_field_and_is_refused_a_build_field(
    observer: Observer, tmp_path: Path, clean_env: pytest.MonkeyPatch
) -> None:
    row = observer.row
    base, changed = policies(row)
    (tmp_path / "changed.yaml").write_text(yaml.safe_dump(changed.model_dump(mode="json")))
    clean_env.setenv("RAGTILLER_POLICY_DIR", str(tmp_path))
    refused = fixed_changes(base, changed)
    if applies(row.path) == "build" and not row.path.startswith(REBUILT):
        assert refused, f"{row.path} is read when the graph is built, but a run may change it"
        graph = observer.graph(base)
        with pytest.raises(InputError, match="fixed when the graph was built"):
            graph.invoke({"query": FACTUAL}, context={"policy": "changed"})
        return
    assert refused == [], f"{row.path} applies per turn, but a run policy changing it is refused"
    assert row.parts_only is None, f"{row.path}: a turn field is compared on turns"
    per_run = scrub(observer(base, {"policy": "changed"}), VOLATILE | {"overrides"})
    assert per_run == scrub(observer(changed), VOLATILE | {"overrides"}), (
        f"a run policy setting {row.path} = {row.value!r} does not turn as a graph built with it"
    )


# --- every field is described, tagged, and has a row ------------------------------------------


def test_the_policy_stays_small() -> None:
    """Issue 42's bar: at most 55 leaves (each route's fields counted once), every one a knob
    the shipped default or a user chooses; an experiment does not earn a field."""
    assert len(LEAVES) <= 55


def test_every_leaf_field_has_a_row() -> None:
    covered = {leaf_of(r.path) for r in ROWS} | {f"promotion.{n}" for n in PROMOTION_ROWS}
    assert covered | {"schema_version"} == set(LEAVES)


def test_schema_version_has_no_other_valid_value() -> None:
    # the one field without a row: no other value validates, so nothing can observe a change
    assert typing.get_args(LEAVES["schema_version"].annotation) == (2,)


@pytest.mark.parametrize("path", sorted(LEAVES))
def test_every_leaf_field_says_what_it_does_and_when_it_applies(path: str) -> None:
    info = LEAVES[path]
    assert info.description and len(info.description.split()) >= 5, f"{path}: no description"
    assert applies(path) in {"build", "turn", "promote"}, f"{path}: no applies tag"
    assert (applies(path) == "promote") == path.startswith("promotion."), path


# --- promotion rules: read by `ragtiller promote`, never by the graph --------------------------

PROMOTION_ROWS: dict[str, tuple[Any, dict[str, Any]]] = {
    "required_slices": (["lexical"], {}),
    "min_ndcg_lift": (0.5, {}),
    "max_slice_regression": (2.0, {}),
    "max_p95_latency_ms": (5.0, {}),
    "max_llm_calls_per_turn": (0.5, {}),
}
"""Rule -> (new value, the base rules it is changed from)."""


def eval_run(rankings: Mapping[str, list[str]], policy: str, llm_calls: int) -> EvalRun:
    results = {
        qid: QueryResult(
            qid,
            tuple(ranking),
            RunManifest(
                run_id=qid,
                created_at="2026-01-01T00:00:00Z",
                policy_id=policy,
                policy_version="1",
                query_type="factual_lookup",
                latency_ms={"total": 10.0},
                llm_calls=llm_calls,
            ),
        )
        for qid, ranking in rankings.items()
    }
    return EvalRun(policy, "1", LABELLED.sha256, results)


LABELLED = load_beir(TINY, slices=TINY / "slices.tsv")
BASELINE = {"q1": [], "q2": ["d3"], "q3": ["d4"], "q4": [], "q5": ["d7"]}
CANDIDATE = {**BASELINE, "q1": ["d1", "d2"], "q3": ["d5", "d4"], "q5": []}
"""Better on q1 (lexical) and q3 (synthesis), worse on q5 (the factual slice); 10 ms a turn,
one LLM call."""


@pytest.mark.parametrize("name", PROMOTION_ROWS)
def test_changing_a_promotion_rule_changes_a_verdict(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(promotion, "MIN_SLICE_QUERIES", 1)  # the tiny dataset's slices judged
    comparison = compare_runs(
        eval_run(CANDIDATE, "candidate", 1),
        eval_run(BASELINE, "baseline", 0),
        LABELLED,
        n_resamples=100,
    )
    value, rules = PROMOTION_ROWS[name]
    base = PromotionConfig.model_validate(rules)
    changed = PromotionConfig.model_validate({**rules, name: value})

    def verdicts(rules: PromotionConfig) -> list[tuple[str, str, bool]]:
        decision = decide(rules, comparison)  # the thresholds it echoes are not compared
        return [("decision", "", decision.decision == "promote")] + [
            (r.rule, r.scope, r.passed) for r in decision.reasons
        ]

    assert verdicts(changed) != verdicts(base), f"promotion.{name} changed no verdict"


# --- the table users read ---------------------------------------------------------------------


def test_docs_list_every_field_as_policy_show_fields_prints_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from ragtiller.cli.app import main

    assert main(["policy", "show", "--fields", "default"]) == 0
    printed = capsys.readouterr().out
    assert printed == fields_table(load_policy())
    text = DOC.read_text(encoding="utf-8")
    documented = text.split("<!-- fields:begin -->\n", 1)[1].split("<!-- fields:end -->", 1)[0]
    assert documented == printed, "docs/policy.md: paste `ragtiller policy show --fields`"
    rows = [line for line in printed.splitlines()[2:]]
    assert len(rows) == len(LEAVES) + 2 * len(RouteConfig.model_fields)  # three routes
    assert all(line.split(" | ")[1] in {"build", "turn", "promote"} for line in rows)


# --- loading ----------------------------------------------------------------------


def test_shipped_default_is_schema_2_and_loads_without_warnings() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_policy().schema_version == 2


def test_policy_show_prints_the_effective_policy(capsys: pytest.CaptureFixture[str]) -> None:
    import yaml

    from ragtiller.cli.app import main

    assert main(["policy", "show", "default"]) == 0
    shown = yaml.safe_load(capsys.readouterr().out)
    assert parse_policy(shown) == load_policy()
    assert shown["deadlines"]["turn_s"] == 15
