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

import json
import uuid
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.indexing import InMemoryRecordManager
from langchain_core.vectorstores import InMemoryVectorStore
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command, Send

from ragtiller import InputError, build_graph
from ragtiller.index import EmbeddedIndex
from ragtiller.ingest import build_index
from ragtiller.ingest.to_store import ingest_to_store
from ragtiller.integrations.langchain import as_retriever
from ragtiller.models import HashingEmbedder

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
    graph = build_graph(tiers=[store], embedder=EMBEDDER)
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
    everyone = build_graph(tiers=[store], embedder=EMBEDDER, require_tenant=False)
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
    graph = build_graph(tiers=[store], embedder=EMBEDDER)
    with pytest.raises(InputError, match="this graph serves several tenants"):
        graph.invoke({"query": Q})
    with pytest.raises(InputError, match="this graph serves several tenants"):
        as_retriever(graph).invoke(Q)
