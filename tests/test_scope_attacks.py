"""A turn's scope, once the gate decided it, cannot be moved by any door a caller holds.

Each test here is an attack through the public API (issue 45): a ``Command`` that sends a
tier task the caller wrote, ``update_state`` on a paused turn or on a thread, a pin set with
``with_config`` replaced by the caller's ``configurable``, a graph over a store of several
tenants, and the medium and low findings beside them. The index: tenant ``acme`` holds
ZEBRAFISH (and KOALA, for its ``staff`` audience only), its namespace ``private`` holds WOMBAT,
tenant ``globex`` holds PLATYPUS. Each attack must be refused with an ``InputError`` that names
no tenant or namespace, or return nothing of what it was not asked for: the marker words are
looked for in everything the run returns or streams.
"""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from fixtures.fakes import ScriptedChatModel
from langchain_core.documents import Document
from langchain_core.indexing import InMemoryRecordManager
from langchain_core.vectorstores import InMemoryVectorStore
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command, Send

from ragtiller import InputError, RunManifest, build_graph, load_policy
from ragtiller.eval.variants import with_overrides
from ragtiller.graph.retrieval_graph import run_sync
from ragtiller.index import EmbeddedIndex
from ragtiller.ingest import build_index
from ragtiller.ingest.to_store import ingest_to_store
from ragtiller.integrations.langchain import as_retriever
from ragtiller.models import HashingEmbedder
from ragtiller.policies.schema import RetrievalPolicy
from ragtiller.stores import RedisCache, RedisQuotaLedger

Q = "which port does the server listen on"
EMBEDDER = HashingEmbedder(dim=64)
NAMES = ("acme", "globex", "private")
"""What a refusal may never name: either scope may be another tenant's."""
STREAM_MODES = ["values", "updates", "custom"]

PIN = {"tenant": "acme", "namespace": "default"}
"""A deployment's pin: acme, in its ``default`` namespace only."""


def _doc(source: str, text: str, **metadata: Any) -> Document:
    return Document(page_content=text, metadata={"source": source, **metadata})


DOCS = [
    _doc(
        "acme.md",
        "# Acme server\n\nZEBRAFISH: the acme server listens on port 7000.",
        tenant="acme",
        audience="public",
    ),
    _doc(
        "staff.md",
        "# Staff server\n\nKOALA: the staff server listens on port 7002.",
        tenant="acme",
        audience="staff",
    ),
    _doc(
        "private.md",
        "# Private server\n\nWOMBAT: the private server listens on port 7001.",
        tenant="acme",
        namespace="private",
    ),
    _doc(
        "globex.md",
        "# Globex server\n\nPLATYPUS: the globex server listens on port 8000.",
        tenant="globex",
    ),
]


@pytest.fixture(scope="module")
def index() -> EmbeddedIndex:
    return build_index(DOCS, embedder=EMBEDDER, progress=False)


@pytest.fixture(params=["sync", "async"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def dump(value: Any) -> str:
    """Everything in ``value`` (a turn's output, stream parts), as one string to search."""
    return json.dumps(value, default=str)


def thread() -> dict[str, Any]:
    return {"configurable": {"thread_id": uuid.uuid4().hex}}


class Caller:
    """An attacker's client of one graph, driving it sync (``invoke``) or async (``astream``
    in every stream mode, so a leak in any streamed update counts)."""

    def __init__(self, graph: Any, mode: str) -> None:
        self.graph, self.mode = graph, mode

    async def run(self, payload: Any, config: Any = None, **kwargs: Any) -> str:
        seen, error = await self.attempt(payload, config, **kwargs)
        if error is not None:
            raise error
        return seen

    async def attempt(
        self, payload: Any, config: Any = None, **kwargs: Any
    ) -> tuple[str, Exception | None]:
        """What the run returned or streamed (up to its error), and the error that ended it."""
        parts: list[Any] = []
        try:
            if self.mode == "sync":
                parts.append(self.graph.invoke(payload, config, **kwargs))
            else:
                stream = self.graph.astream(payload, config, stream_mode=STREAM_MODES, **kwargs)
                async for part in stream:
                    parts.append(part)
        except Exception as e:  # judged by refused_or_clean: only an InputError refuses
            return dump(parts), e
        return dump(parts), None

    async def state(self, config: Any) -> Any:
        if self.mode == "sync":
            return self.graph.get_state(config)
        return await self.graph.aget_state(config)

    async def update(self, config: Any, values: Any, as_node: str | None = None) -> None:
        if self.mode == "sync":
            self.graph.update_state(config, values, as_node=as_node)
        else:
            await self.graph.aupdate_state(config, values, as_node=as_node)


def refused_or_clean(outcome: tuple[str, Exception | None], *forbidden: str) -> None:
    """Nothing the run returned or streamed holds a word of ``forbidden``, and a run that was
    stopped was refused with an ``InputError`` naming no tenant or namespace."""
    seen, error = outcome
    assert [word for word in forbidden if word in seen] == [], "leaked"
    if error is not None:
        assert isinstance(error, InputError), f"not a refusal: {error!r}"
        named = [name for name in NAMES if name in str(error).lower()]
        assert named == [], f"the refusal names {named}: {error}"


# --- 1. Command(goto=Send("tier_search", task)) skips the gate -------------------------------


def forged_task(namespaces: list[str] | None, filter: dict[str, Any] | None) -> dict[str, Any]:
    return {
        "tier": "lexical",
        "query": Q,
        "vector": None,
        "k": 50,
        "namespaces": namespaces,
        "filter": filter,
        "deadline_s": 5.0,
        "turn_bound": False,
    }


async def test_a_sent_tier_task_cannot_widen_a_pinned_turn_to_another_namespace(
    index: EmbeddedIndex, mode: str
) -> None:
    caller = Caller(build_graph(index=index, checkpointer=InMemorySaver()), mode)
    config = thread()
    first = await caller.run({"query": Q}, config, context=PIN)
    assert "ZEBRAFISH" in first and "WOMBAT" not in first  # the pin holds on an ordinary turn
    task = forged_task(None, {"tenant": "acme"})
    sent = await caller.attempt(Command(goto=Send("tier_search", task)), config, context=PIN)
    refused_or_clean(sent, "WOMBAT", "PLATYPUS")


async def test_a_sent_tier_task_without_a_filter_cannot_widen_an_input_scoped_turn(
    index: EmbeddedIndex, mode: str
) -> None:
    caller = Caller(build_graph(index=index, checkpointer=InMemorySaver()), mode)
    config = thread()
    first = await caller.run({"query": Q, "tenant": "acme"}, config)
    assert "ZEBRAFISH" in first and "PLATYPUS" not in first
    sent = await caller.attempt(Command(goto=Send("tier_search", forged_task(None, None))), config)
    refused_or_clean(sent, "PLATYPUS", "WOMBAT")


# --- 2. update_state rewrites a paused turn's tasks, route or the thread's scope -------------


def paused_graph(index: EmbeddedIndex) -> Any:
    return build_graph(index=index, checkpointer=InMemorySaver(), checkpoint_hits=True)


@pytest.mark.parametrize(
    ("context", "payload", "edit", "forbidden"),
    [
        (PIN, {"query": Q}, {"namespaces": None}, ("WOMBAT", "PLATYPUS")),
        (None, {"query": Q, "tenant": "acme"}, {"filter": None}, ("PLATYPUS", "WOMBAT")),
        (None, {"query": Q, "tenant": "acme"}, {"namespaces": None}, ("WOMBAT",)),
    ],
    ids=["pinned-namespaces", "input-tenant-filter", "input-tenant-namespaces"],
)
async def test_tier_tasks_rewritten_while_paused_cannot_widen_the_turn(
    index: EmbeddedIndex,
    mode: str,
    context: dict[str, Any] | None,
    payload: dict[str, Any],
    edit: dict[str, Any],
    forbidden: tuple[str, ...],
) -> None:
    caller = Caller(paused_graph(index), mode)
    config = thread()
    await caller.run(payload, config, context=context, interrupt_before=["tier_search"])
    paused = await caller.state(config)
    assert paused.next == ("tier_search",) * len(paused.values["tier_tasks"])
    tasks = [dict(task, **edit) for task in paused.values["tier_tasks"]]
    await caller.update(config, {"tier_tasks": tasks}, as_node="embed")
    refused_or_clean(await caller.attempt(None, config, context=context), *forbidden)


@pytest.mark.parametrize(
    ("context", "payload", "edit", "forbidden"),
    [
        (None, {"query": Q, "tenant": "acme"}, {"tenant": None}, ("PLATYPUS",)),
        (PIN, {"query": Q}, {"namespaces": None}, ("WOMBAT",)),
        (None, {"query": Q, "tenant": "acme"}, {"namespaces": None}, ("WOMBAT",)),
    ],
    ids=["input-tenant-none", "pinned-namespaces-none", "input-namespaces-none"],
)
async def test_a_route_rewritten_before_embed_cannot_widen_the_turn(
    index: EmbeddedIndex,
    mode: str,
    context: dict[str, Any] | None,
    payload: dict[str, Any],
    edit: dict[str, Any],
    forbidden: tuple[str, ...],
) -> None:
    """The route's tenant and namespaces are the gate's decision: the manifest must not say
    ``tenant='acme'`` (or ``['default']``) over a search of more, and a resume may not search
    more than the gate decided."""
    caller = Caller(paused_graph(index), mode)
    config = thread()
    await caller.run(payload, config, context=context, interrupt_before=["embed"])
    route = (await caller.state(config)).values["route"]
    await caller.update(config, {"route": {**route, **edit}})
    refused_or_clean(await caller.attempt(None, config, context=context), *forbidden)


async def test_a_scope_written_onto_acmes_thread_does_not_hand_globex_acmes_answer(
    index: EmbeddedIndex, mode: str
) -> None:
    caller = Caller(build_graph(index=index, checkpointer=InMemorySaver()), mode)
    config = thread()
    first = await caller.run({"query": Q}, config, context={"tenant": "acme"})
    assert "ZEBRAFISH" in first
    forged = {"tenant": "globex", "namespaces": None, "filter": None}
    await caller.update(config, {"scope": forged})
    globex = await caller.attempt({"query": Q}, config, context={"tenant": "globex"})
    refused_or_clean(globex, "ZEBRAFISH", "KOALA", "WOMBAT")


# --- 3. a pin set with with_config is replaced by the caller's configurable ------------------


def pinned(index: EmbeddedIndex, pin: dict[str, Any]) -> Any:
    """What docs/usage.md offers an auth layer: ``with_config`` on the compiled graph."""
    return build_graph(index=index).with_config(configurable={"ragtiller": pin})


async def test_a_tenant_pinned_with_with_config_refuses_the_callers_other_tenant(
    index: EmbeddedIndex, mode: str
) -> None:
    caller = Caller(pinned(index, {"tenant": "acme"}), mode)
    own = await caller.run({"query": Q})
    assert "ZEBRAFISH" in own and "PLATYPUS" not in own  # the pin holds on its own
    other = {"configurable": {"ragtiller": {"tenant": "globex"}}}
    seen, error = await caller.attempt({"query": Q}, other)
    refused_or_clean((seen, error), "PLATYPUS")
    assert isinstance(error, InputError), "a caller's conflicting tenant must be refused"


async def test_a_filter_pinned_with_with_config_holds_when_the_caller_adds_a_field(
    index: EmbeddedIndex, mode: str
) -> None:
    caller = Caller(pinned(index, {"tenant": "acme", "filter": {"audience": "public"}}), mode)
    own = await caller.run({"query": Q})
    assert "ZEBRAFISH" in own and "KOALA" not in own
    harmless = {"configurable": {"ragtiller": {"tenant": "acme", "top_k": 3}}}
    refused_or_clean(await caller.attempt({"query": Q}, harmless), "KOALA", "WOMBAT", "PLATYPUS")


# --- 4. a graph over another store of several tenants does not deny ---------------------------


def both_tenants_store() -> InMemoryVectorStore:
    store = InMemoryVectorStore(EMBEDDER)
    store.add_documents([Document(d.page_content, metadata=dict(d.metadata)) for d in DOCS])
    return store


async def test_an_unscoped_turn_over_a_store_of_several_tenants_is_refused(mode: str) -> None:
    """Default deny on any store: a graph cannot tell how many tenants a store holds, so an
    unscoped turn is refused unless the operator says it holds one (``require_tenant=False``)."""
    store = both_tenants_store()
    graph: Any = build_graph(tiers=[store], embedder=EMBEDDER)
    with pytest.raises(InputError, match="this graph serves several tenants"):
        await Caller(graph, mode).run({"query": Q})
    retriever = as_retriever(graph)
    with pytest.raises(InputError, match="this graph serves several tenants"):
        if mode == "sync":
            retriever.invoke(Q)
        else:
            await retriever.ainvoke(Q)
    scoped = await Caller(graph, mode).run({"query": Q, "tenant": "globex"})
    assert "PLATYPUS" in scoped and "ZEBRAFISH" not in scoped
    everyone: Any = build_graph(tiers=[store], embedder=EMBEDDER, require_tenant=False)
    assert "PLATYPUS" in dump(everyone.invoke({"query": Q}))  # the operator's own choice


def test_a_store_written_by_ingest_to_store_with_tenants_refuses_an_unscoped_turn() -> None:
    """``ingest_to_store`` sees every chunk's metadata: the tenants it wrote must reach the
    graph built over that store (default deny), not be recorded nowhere."""
    store = InMemoryVectorStore(EMBEDDER)
    records = InMemoryRecordManager("attacks")
    records.create_schema()
    ingest_to_store(
        [Document(d.page_content, metadata=dict(d.metadata)) for d in DOCS], store, records
    )
    graph: Any = build_graph(tiers=[store], embedder=EMBEDDER)
    with pytest.raises(InputError, match="this graph serves several tenants"):
        graph.invoke({"query": Q})
    with pytest.raises(InputError, match="this graph serves several tenants"):
        as_retriever(graph).invoke(Q)


# --- 5. a daily LLM quota per tenant, and a quota_remaining that shows only the tenant's -------

BROADS = tuple(f"give me an overview of the {what}" for what in ("servers", "ports", "staff"))
"""Three broad questions (three step-back calls: a repeat would be answered by the cache)."""
PER_TENANT = {"quota.chat_gen_per_day": 10, "quota.chat_gen_per_tenant_per_day": 3}


def per_tenant_policy(**limits: Any) -> RetrievalPolicy:
    return with_overrides(load_policy(), limits or PER_TENANT)


def three_acme_turns_leave_globex_its_own_budget(turn: Callable[[str, str], RunManifest]) -> None:
    """Issue 45, finding 5: three acme turns spend acme's 3 calls, not globex's; globex's
    figures never move with them, and acme's label says which budget ran out."""
    before = turn("globex", Q)
    assert before.quota_remaining["chat_gen"] == 3 and before.quota_budget["chat_gen"] == "tenant"
    for query in BROADS:
        assert turn("acme", query).step_back.status == "done"
        assert turn("globex", Q).quota_remaining == before.quota_remaining
    spent = turn("acme", "give me an overview of the network")
    assert (spent.step_back.status, spent.step_back.reason) == ("skipped", "quota")
    assert "step_back skipped: quota (tenant daily)" in spent.degraded
    assert spent.quota_remaining["chat_gen"] == 0
    broad = turn("globex", BROADS[0])
    assert broad.step_back.status == "done" and broad.step_back.from_cache is False
    assert broad.quota_remaining["chat_gen"] == 2


def test_per_tenant_daily_llm_limits_keep_one_tenants_turns_out_of_anothers_budget(
    index: EmbeddedIndex,
) -> None:
    g: Any = build_graph(per_tenant_policy(), index=index, chat_model=ScriptedChatModel())
    three_acme_turns_leave_globex_its_own_budget(
        lambda tenant, query: g.invoke({"query": query, "tenant": tenant})["manifest"]
    )


@pytest.mark.redis
def test_per_tenant_daily_llm_limits_hold_in_redis(
    index: EmbeddedIndex, redis_url: str, redis_prefix: str
) -> None:
    """Two replicas over one redis-server; their ledgers have no per-tenant limit of their
    own: the policy's holds as a cap, spent in the same Lua step as the shared budget."""
    stores = [
        (
            RedisQuotaLedger(
                {"chat_gen": 10, "rerank_calls": 5}, url=redis_url, prefix=redis_prefix
            ),
            RedisCache(url=redis_url, prefix=redis_prefix),
        )
        for _ in range(2)
    ]
    replicas = itertools.cycle(
        [
            build_graph(
                per_tenant_policy(), index=index, chat_model=ScriptedChatModel(), quota=q, cache=c
            )
            for q, c in stores
        ]
    )
    try:
        three_acme_turns_leave_globex_its_own_budget(
            lambda tenant, query: next(replicas).invoke({"query": query, "tenant": tenant})[
                "manifest"
            ]
        )
    finally:
        for store in (store for pair in stores for store in pair):
            store.close()
            run_sync(store.aclose)


def test_per_tenant_daily_llm_limits_hold_on_checkpointed_threads(index: EmbeddedIndex) -> None:
    g: Any = build_graph(
        per_tenant_policy(),
        index=index,
        chat_model=ScriptedChatModel(),
        checkpointer=InMemorySaver(),
    )
    threads = {tenant: thread() for tenant in ("acme", "globex")}

    def turn(tenant: str, query: str) -> RunManifest:
        manifest: RunManifest = g.invoke({"query": query, "tenant": tenant}, threads[tenant])[
            "manifest"
        ]
        return manifest

    three_acme_turns_leave_globex_its_own_budget(turn)


def test_the_shared_daily_limit_keeps_its_label_and_says_whose_figure_it_is(
    index: EmbeddedIndex,
) -> None:
    g: Any = build_graph(
        per_tenant_policy(**{"quota.chat_gen_per_day": 3}),
        index=index,
        chat_model=ScriptedChatModel(),
    )
    for query in BROADS:
        g.invoke({"query": query, "tenant": "acme"})
    globex = g.invoke({"query": BROADS[0], "tenant": "globex"})["manifest"]
    assert globex.step_back.reason == "quota"
    assert "step_back skipped: quota" in globex.degraded
    assert globex.quota_remaining["chat_gen"] == 0 and globex.quota_budget["chat_gen"] == "shared"


def test_a_run_policy_lowers_a_tenants_limit_but_never_raises_it(
    index: EmbeddedIndex, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, limit in (("lower", 1), ("none", None), ("higher", 100)):
        policy = per_tenant_policy(**{**PER_TENANT, "quota.chat_gen_per_tenant_per_day": limit})
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(policy.model_dump(mode="json")))
    monkeypatch.setenv("RAGTILLER_POLICY_DIR", str(tmp_path))
    g: Any = build_graph(per_tenant_policy(), index=index, chat_model=ScriptedChatModel())
    for name, left in (("lower", 1), ("none", 3), ("higher", 3)):
        run = g.invoke({"query": Q, "tenant": name}, context={"policy": name})["manifest"]
        assert run.quota_remaining["chat_gen"] == left, name


def test_the_llm_router_spends_the_turns_tenant_budget_and_says_so(index: EmbeddedIndex) -> None:
    from test_llm_router import StructuredRouterModel

    model = StructuredRouterModel()
    policy = per_tenant_policy(
        **{**PER_TENANT, "quota.chat_gen_per_tenant_per_day": 1, "router.llm_router": "on"}
    )
    g: Any = build_graph(policy, index=index, chat_model=model)
    first = g.invoke({"query": Q, "tenant": "acme"})["manifest"]
    assert first.router == "llm" and first.quota_remaining["chat_gen"] == 0
    second = g.invoke({"query": Q + " today", "tenant": "acme"})["manifest"]
    assert second.router_detail["fallback_reason"] == "quota"
    assert "llm router skipped: quota (tenant daily)" in second.degraded
    assert g.invoke({"query": Q, "tenant": "globex"})["manifest"].router == "llm"


# --- 6. the LLM router's cache is kept per tenant ---------------------------------------------


def test_the_llm_routers_cache_tells_globex_nothing_of_acmes_question(index: EmbeddedIndex) -> None:
    """As step-back's: a globex turn's route is read by the model from globex's own text,
    never from acme's cached reading of a casefold-equal question."""
    from test_llm_router import StructuredRouterModel

    from ragtiller.policies.schema import RouterConfig
    from ragtiller.routing.llm import make_llm_router
    from ragtiller.stores import MemoryCache, MemoryQuotaLedger

    model, cache = StructuredRouterModel(), MemoryCache()
    quota = MemoryQuotaLedger({"chat_gen": 20, "rerank_calls": 10})
    router = make_llm_router(
        RouterConfig(llm_router="on"), chat_model=model, quota=quota, cache=cache
    )
    g: Any = build_graph(index=index, llm_router=router, quota=quota, cache=cache)
    acme = g.invoke({"query": Q.upper(), "tenant": "acme"})["manifest"]
    globex = g.invoke({"query": Q, "tenant": "globex"})["manifest"]
    assert acme.router_detail["from_cache"] is False
    assert globex.router_detail["from_cache"] is False
    assert model.calls == 2 and model.prompts[-1].count(Q) >= 1


# --- 7. filters ---------------------------------------------------------------------------------


FLAGGED = [
    _doc("bool.md", "BOOLEAN: the flagged server listens on port 1.", tenant="acme", flag=True),
    _doc("int.md", "INTEGER: the flagged server listens on port 2.", tenant="acme", flag=1),
    _doc("float.md", "FLOATING: the flagged server listens on port 3.", tenant="acme", flag=1.0),
]


def sources(graph: Any, **context: Any) -> list[str] | InputError:
    try:
        out = graph.invoke({"query": Q}, context={"tenant": "acme", **context})
    except InputError as refused:
        return refused
    return sorted(d.metadata["source"] for d in out["documents"])


def test_a_filter_on_true_1_or_1_0_finds_the_same_documents_on_every_store() -> None:
    from langchain_chroma import Chroma

    embedded: Any = build_graph(index=build_index(FLAGGED, embedder=EMBEDDER, progress=False))
    chroma = Chroma(f"flags-{uuid.uuid4().hex}", embedding_function=EMBEDDER)
    chroma.add_documents(FLAGGED)
    over_chroma: Any = build_graph(tiers=[chroma], embedder=EMBEDDER, require_tenant=True)
    for value in (True, 1, 1.0):
        on_index, on_chroma = (sources(g, filter={"flag": value}) for g in (embedded, over_chroma))
        if isinstance(on_index, InputError) or isinstance(on_chroma, InputError):
            assert type(on_index) is type(on_chroma), (value, on_index, on_chroma)
        else:
            assert on_index == on_chroma, value


def test_a_filter_on_the_doc_id_a_document_shows_finds_it_on_an_in_memory_store() -> None:
    graph: Any = build_graph(tiers=[both_tenants_store()], embedder=EMBEDDER, require_tenant=True)
    shown = graph.invoke({"query": Q, "tenant": "acme"})["documents"]
    doc_id = shown[0].metadata["doc_id"]
    found = graph.invoke({"query": Q}, context={"tenant": "acme", "filter": {"doc_id": doc_id}})
    assert [d.metadata["doc_id"] for d in found["documents"]] == [doc_id]
    assert not any("acme" in label for label in found["manifest"].degraded)


@pytest.mark.parametrize(
    "filter",
    [{"audience": "x" * 2_000_000}, {"k" * 100_000: "public"}, {"level": 10**5000}],
    ids=["2MB-value", "100k-key", "huge-int"],
)
def test_a_filter_of_unbounded_size_is_an_input_error(index: EmbeddedIndex, filter: Any) -> None:
    """Refused before the turn: not copied into a 4 MB manifest, nor failing the checkpointer
    (or the server's JSON) with a raw ``TypeError`` / ``ValueError`` on a 5,000-digit int."""
    graph: Any = build_graph(index=index, checkpointer=InMemorySaver())
    with pytest.raises(InputError) as refused:
        graph.invoke({"query": Q}, thread(), context={"tenant": "acme", "filter": filter})
    assert len(str(refused.value)) < 2_000


# --- 8. oracles: what a tenant's turn tells of another tenant's documents ----------------------


ORACLE_QUERY = "where is the kestrel feeder"


def oracle_index(acme_word: str) -> EmbeddedIndex:
    """Globex's document about a kestrel feeder, beside acme's two documents holding
    ``acme_word`` (the indexes for two words differ in nothing else)."""
    docs = [
        _doc("g.md", "PLATYPUS: the globex kestrel feeder sits by the server.", tenant="globex"),
        *(
            _doc(f"a{i}.md", f"The acme {acme_word} nest sits by gate {i}.", tenant="acme")
            for i in range(2)
        ),
    ]
    return build_index(docs, embedder=EMBEDDER, progress=False)


def globex_sees(acme_word: str) -> list[Any]:
    """Globex's documents (text and metadata) for its own question, over ``oracle_index``."""
    out = build_graph(index=oracle_index(acme_word)).invoke(
        {"query": ORACLE_QUERY, "tenant": "globex"}
    )
    return [(d.page_content, d.metadata) for d in out["documents"]]


def test_globexs_documents_carry_no_raw_score_that_tells_of_acmes_words() -> None:
    """BM25's statistics are corpus-wide, so a raw lexical score tells whether other tenants'
    documents hold a word (docs/usage.md: one index per tenant closes it). A document carries
    no raw tier score: globex's documents for its own question are the same whether acme's
    documents hold its word or not. The manifest, the operator's record, keeps them."""
    kestrel, heron = globex_sees("kestrel"), globex_sees("heron")
    assert kestrel == heron
    assert kestrel and all("tier_scores" not in metadata for _, metadata in kestrel)


def test_another_tenants_namespace_looks_like_one_that_does_not_exist(
    index: EmbeddedIndex,
) -> None:
    """Globex asks for acme's ``private`` and for ``nosuch``: the labels and context are
    the same but for the name, so a tenant cannot tell another's namespace exists."""
    graph: Any = build_graph(index=index)

    def seen(namespace: str) -> str:
        out = graph.invoke({"query": Q, "namespace": namespace, "tenant": "globex"})
        return dump([out["context"], out["manifest"].degraded]).replace(namespace, "NS")

    assert seen("private") == seen("nosuch")


# --- 9. errors a remote caller reads -------------------------------------------------------------


@pytest.mark.parametrize("name", ["nosuch", "broken"])
def test_a_refused_policy_name_lists_no_operator_policy_and_names_no_path(
    index: EmbeddedIndex, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """An unknown name is refused without the list of ``RAGTILLER_POLICY_DIR`` (its names may
    be customers'); an invalid file there is refused without the server's path."""
    policy = load_policy().model_dump(mode="json") | {"policy_id": "initech-prod"}
    (tmp_path / "initech-prod.yaml").write_text(yaml.safe_dump(policy), "utf-8")
    (tmp_path / "broken.yaml").write_text("routes: 5\n", "utf-8")
    monkeypatch.setenv("RAGTILLER_POLICY_DIR", str(tmp_path))
    graph: Any = build_graph(index=index)
    with pytest.raises(InputError) as refused:
        graph.invoke({"query": Q, "tenant": "acme"}, context={"policy": name})
    message = str(refused.value)
    assert "initech" not in message and str(tmp_path) not in message, message
    assert graph.invoke({"query": Q, "tenant": "acme"}, context={"policy": "initech-prod"})


@pytest.mark.parametrize("path", ["docs\x00.md", "d" * 5_000], ids=["nul", "5000-chars"])
def test_an_indexer_path_it_cannot_open_is_an_input_error(tmp_path: Path, path: str) -> None:
    from ragtiller.integrations.indexing_graph import IndexingTarget, build_indexing_graph

    (tmp_path / "root").mkdir()
    indexer = build_indexing_graph(
        IndexingTarget(tmp_path / "index", ingest_root=tmp_path / "root")
    )
    with pytest.raises(InputError) as refused:
        indexer.invoke({"path": path})
    assert str(tmp_path) not in str(refused.value) and len(str(refused.value)) < 2_000


def test_the_indexers_duplicate_id_error_names_no_server_path(tmp_path: Path) -> None:
    from ragtiller.errors import RagtillerError
    from ragtiller.integrations.indexing_graph import IndexingTarget, build_indexing_graph

    root = tmp_path / "root"
    root.mkdir()
    record = json.dumps({"_id": "same", "title": "Ports", "text": "The server listens on 8000."})
    (root / "corpus.jsonl").write_text(f"{record}\n{record}\n", "utf-8")
    indexer = build_indexing_graph(IndexingTarget(tmp_path / "index", ingest_root=root))
    with pytest.raises(RagtillerError, match="more than one source") as refused:
        indexer.invoke({"path": "corpus.jsonl"})
    assert str(tmp_path) not in str(refused.value), str(refused.value)


# --- 11. lone surrogates ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "context",
    [{"tenant": "acme\udc80"}, {"tenant": "acme", "namespace": "default\udc80"},
     {"tenant": "acme", "filter": {"audience": "public\udc80"}}],
    ids=["tenant", "namespace", "filter"],
)  # fmt: skip
def test_a_lone_surrogate_in_the_scope_gives_a_manifest_json_can_carry(
    index: EmbeddedIndex, context: dict[str, Any]
) -> None:
    try:
        graph: Any = build_graph(index=index)
        out = graph.invoke({"query": Q}, context=context)
    except InputError:
        return
    manifest = out["manifest"]
    json.loads(manifest.model_dump_json())
    json.dumps(manifest.model_dump(mode="json"), ensure_ascii=False).encode("utf-8")
