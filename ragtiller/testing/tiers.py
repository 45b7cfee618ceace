"""The tier contract: what every tier must do for the graph to fuse it safely (docs/usage.md)."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from ragtiller.core.tiers import Hit, SearchRequest, Tier
from ragtiller.testing._fixtures import required

Ask = Callable[..., list[Hit]]
TierFactory = Callable[[Sequence[Document]], Tier]
"""What ``make_tier`` returns: Documents in, a tier holding exactly them out."""
CONTRACT_DIM = 64


CORPUS = (  # id, text, namespace, color, tenant, parent_id
    ("t1", "cancel a running task before it finishes", "default", "red", "acme", "p1"),
    (
        "t2",
        "a cancelled task raises CancelledError in its awaiter",
        "default",
        "blue",
        "acme",
        "p1",
    ),
    ("t3", "wait_for applies a timeout to an awaitable", "default", "red", "globex", None),
    ("l1", "the event loop runs callbacks and coroutines", "default", "blue", "globex", None),
    ("l2", "a loop policy creates new event loops", "default", "green", "acme", None),
    ("s1", "stream readers read bytes from sockets", "default", "green", None, None),
    ("bare", "a bare note about threads and locks", None, None, None, None),
    ("q1", "queue put blocks while the queue is full", "api", "red", "acme", None),
    ("q2", "queue get blocks while the queue is empty", "api", "blue", "globex", None),
    ("o1", "queue put blocks while the queue is full", "other", None, "acme", None),
)
"""Ten documents in three namespaces, two tenants (and none), three colours; one bare."""


def contract_corpus() -> list[Document]:
    """The :data:`CORPUS` documents (``doc_id`` ``doc-<id>``, ``source`` ``<id>.md``)."""
    docs = []
    for id, text, namespace, *values in CORPUS:
        if namespace is None:
            docs.append(Document(id=id, page_content=text))
            continue
        named = zip(("color", "tenant", "parent_id"), values, strict=True)
        md = {"source": f"{id}.md", "doc_id": f"doc-{id}", **{k: v for k, v in named if v}}
        docs.append(Document(id=id, page_content=text, metadata={**md, "namespace": namespace}))
    return docs


def _namespace(d: Document) -> str:
    return str(d.metadata.get("namespace") or "default")


def in_scope_ids(namespaces: Sequence[str] | None = None, **wanted: str | list[str]) -> set[str]:
    """Ids of the documents in ``namespaces`` whose metadata passes ``wanted``: the answer."""
    out = set()
    for d in contract_corpus():
        if namespaces is not None and _namespace(d) not in namespaces:
            continue
        ok = all(
            k in d.metadata and d.metadata[k] in (v if isinstance(v, list) else [v])
            for k, v in wanted.items()
        )
        if ok:
            out.add(str(d.id))
    return out


def text_of(id: str) -> str:
    """The text of contract document ``id``."""
    return next(d.page_content for d in contract_corpus() if d.id == id)


class TierContract:
    """The tier contract as pytest tests; subclass it with a ``make_tier`` fixture."""

    @pytest.fixture
    def contract_embedder(self) -> Embeddings:
        """The embedder of the query vectors (and of your tier's vectors): 64-dim hashing."""
        from ragtiller.models import HashingEmbedder

        return HashingEmbedder(dim=CONTRACT_DIM)

    make_tier = required("make_tier", "TierContract")

    @pytest.fixture
    def tier(self, make_tier: TierFactory) -> Tier:
        """Your tier over :func:`contract_corpus`."""
        return make_tier(contract_corpus())

    @pytest.fixture
    def ask(self, tier: Tier, contract_embedder: Embeddings) -> Ask:
        """``ask(text, k=10, namespaces=..., filter=...)``: one search, checked for shape."""

        def run(text: str, k: int = 10, **scope: Any) -> list[Hit]:
            vector = contract_embedder.embed_query(text)
            hits = tier.search(SearchRequest(query=text, vector=vector, k=k, **scope))
            assert isinstance(hits, list) and len(hits) <= k
            ids = [h["id"] for h in hits]
            assert len(set(ids)) == len(ids), f"an id repeats: {ids}"
            scores = [h["score"] for h in hits]
            assert all(isinstance(s, float) and math.isfinite(s) for s in scores), scores
            assert scores == sorted(scores, reverse=True), f"not best first: {scores}"
            return hits

        return run

    def test_k_caps_the_hits_best_first(self, ask: Ask, tier: Tier) -> None:
        assert len(ask("task loop", k=2, namespaces=["default"])) == 2
        with pytest.raises(ValueError, match="k must be > 0"):
            tier.search(SearchRequest(query="task", vector=[1.0] * CONTRACT_DIM, k=0))

    @pytest.mark.parametrize("id", ["t1", "l1", "s1", "bare"])
    def test_a_documents_own_text_finds_it_first(self, ask: Ask, id: str) -> None:
        hits = ask(text_of(id), namespaces=["default"])
        assert hits and hits[0]["id"] == id

    def test_k_larger_than_the_scope_returns_at_most_the_scope(self, ask: Ask, tier: Tier) -> None:
        hits = ask("a task or a loop or a queue", k=50, namespaces=["default"])
        ids = {h["id"] for h in hits}
        assert ids <= in_scope_ids(["default"])
        if tier.needs_vector:
            assert ids == in_scope_ids(["default"])

    def test_namespaces_are_isolated(self, ask: Ask) -> None:
        text = text_of("q1")
        api = ask(text, namespaces=["api"])
        assert api and api[0]["id"] == "q1" and {h["id"] for h in api} <= {"q1", "q2"}
        both = {h["id"] for h in ask(text, k=2, namespaces=["api", "other"])}
        assert both == {"q1", "o1"}  # the same text in two namespaces
        assert ask(text, namespaces=["missing"]) == []
        default = {h["id"] for h in ask(text, k=50, namespaces=["default"])}
        assert default <= in_scope_ids(["default"])

    @pytest.mark.parametrize("tenant", ["acme", "globex"])
    @pytest.mark.parametrize("namespaces", [None, ["default"], ["default", "api", "other"]])
    def test_a_tenant_sees_only_its_own_documents(
        self, ask: Ask, tier: Tier, tenant: str, namespaces: list[str] | None
    ) -> None:
        other = "globex" if tenant == "acme" else "acme"
        expected = in_scope_ids(namespaces, tenant=tenant)
        for target in sorted(in_scope_ids(namespaces, tenant=other)):  # the other's own words
            hits = ask(text_of(target), k=50, namespaces=namespaces, filter={"tenant": tenant})
            assert {h["id"] for h in hits} <= expected
            assert all(h["metadata"].get("tenant") == tenant for h in hits)
        scope = {"namespaces": namespaces, "filter": {"tenant": tenant}}
        everything = ask("a task or a loop or a queue", k=50, **scope)
        assert {h["id"] for h in everything} <= expected
        if tier.needs_vector:
            assert {h["id"] for h in everything} == expected

    @pytest.mark.parametrize(
        "filter",
        [
            {"color": "red"},
            {"color": ["red", "green"]},
            {"tenant": "acme", "color": ["red", "green"]},
            {"color": ["purple"]},
        ],
    )
    def test_metadata_filters_are_equality_and_membership(
        self, ask: Ask, tier: Tier, filter: dict[str, Any]
    ) -> None:
        namespaces = ["default", "api"]
        expected = in_scope_ids(namespaces, **filter)
        hits = ask(
            "a task or a loop or a queue or a stream", k=50, namespaces=namespaces, filter=filter
        )
        assert {h["id"] for h in hits} <= expected
        if tier.needs_vector:
            assert {h["id"] for h in hits} == expected
        for id in sorted(expected):  # each one is found by its own text
            assert id in {h["id"] for h in ask(text_of(id), namespaces=namespaces, filter=filter)}

    def test_hit_fields_come_from_metadata(self, ask: Ask) -> None:
        t1 = ask(text_of("t1"), namespaces=["default"])[0]
        assert (t1["id"], t1["text"]) == ("t1", text_of("t1"))
        assert (t1["doc_id"], t1["parent_id"], t1["source"]) == ("doc-t1", "p1", "t1.md")
        assert t1["metadata"]["color"] == "red" and t1["metadata"]["tenant"] == "acme"
        assert not {"doc_id", "parent_id", "source"} & set(t1["metadata"])
        bare = ask(text_of("bare"), namespaces=["default"])[0]
        assert (bare["id"], bare["doc_id"]) == ("bare", "bare")
        assert (bare["parent_id"], bare["source"]) == (None, "")

    def test_asearch_answers_as_search(self, tier: Tier, contract_embedder: Embeddings) -> None:
        request = SearchRequest(
            query="event loop task",
            vector=contract_embedder.embed_query("event loop task"),
            k=4,
            namespaces=["default", "api"],
            filter={"color": ["red", "blue"]},
        )
        assert asyncio.run(tier.asearch(request)) == tier.search(request)
