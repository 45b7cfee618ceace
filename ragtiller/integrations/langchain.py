"""LangChain adapters: the retrieval graph as a ``BaseRetriever`` and as an agent tool.

Both run the compiled graph itself (``invoke`` on the sync path, ``ainvoke`` on the async one),
so an agent's retrieval takes the same policy, quota and rerank decisions as any other caller,
and each call delivers its own run manifest, once: nothing is stored on the shared retriever or
tool.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    BaseCallbackHandler,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.tools import StructuredTool
from pydantic import BaseModel, ConfigDict, Field, model_validator

from ragtiller.core.run_manifest import RunManifest
from ragtiller.errors import ConfigurationError, InputError
from ragtiller.nodes.run_input import answer_text
from ragtiller.policies.run_context import CONFIG_KEY, RunContext

MANIFEST_EVENT = "ragtiller_manifest"
"""Name of the custom callback event that carries a retriever call's manifest."""
RUN_ID_KEY = "ragtiller_run_id"
"""Document metadata key of the turn (the manifest's ``run_id``) a retrieved document came from."""

DEFAULT_TOOL_NAME = "search_docs"
DEFAULT_TOOL_DESCRIPTION = (
    "Search the indexed documentation. Input: the user's question in their own words. "
    "Returns passages numbered [1], [2], ...; cite them by number in the answer."
)

Namespace = str | list[str] | None
"""A namespace, several, or None for the route's own."""


SCOPE_FIELDS = ("tenant", "namespace", "filter")
"""Run-context fields that limit what a call may see: fixed once a retriever sets them."""
SEARCH_KWARGS = ("k", *RunContext.model_fields)
"""Keys ``search_kwargs`` accepts: ``k`` (LangChain's name for ``top_k``) and the run context's."""


def run_context(
    search_kwargs: Mapping[str, Any] | None = None,
    *,
    k: int | None = None,
    namespace: Namespace = None,
    tenant: str | None = None,
) -> RunContext:
    """The run context for one call: ``search_kwargs`` first, explicit arguments over them.

    Raises:
        InputError: An unknown key (the message lists the accepted ones) or a bad value.
    """
    kwargs = dict(search_kwargs or {})
    unknown = sorted(set(kwargs) - set(SEARCH_KWARGS))
    if unknown:
        raise InputError(
            f"unknown search_kwargs {', '.join(map(repr, unknown))}; accepted: {', '.join(SEARCH_KWARGS)}"
        )
    if "k" in kwargs:
        kwargs["top_k"] = kwargs.pop("k")
    explicit = {"top_k": k, "namespace": namespace, "tenant": tenant}
    kwargs.update({key: value for key, value in explicit.items() if value is not None})
    return RunContext(**kwargs)


def _output(out: Any) -> tuple[list[Document], str, dict[str, Any]]:
    """Documents, context and the manifest as a JSON dict, from one turn's output.

    Raises:
        ConfigurationError: The output is not a ragtiller graph's ``{documents, context,
            manifest}``.
    """
    if not isinstance(out, Mapping) or not {"documents", "context", "manifest"} <= set(out):
        keys = sorted(out) if isinstance(out, Mapping) else type(out).__name__
        raise ConfigurationError(
            "expected a ragtiller graph (output keys documents, context, manifest), but its "
            f"output was {keys}; pass the graph ragtiller.build_graph returns"
        )
    manifest = RunManifest.model_validate(out["manifest"]).model_dump(mode="json")
    return list(out["documents"]), str(out["context"]), manifest


def _with_run_id(documents: list[Document], manifest: dict[str, Any]) -> list[Document]:
    """Copies of ``documents`` whose metadata also names their turn (not the whole manifest:
    that is sent once per call, as the :data:`MANIFEST_EVENT` callback event)."""
    run_id = manifest["run_id"]
    return [
        doc.model_copy(update={"metadata": {**doc.metadata, RUN_ID_KEY: run_id}})
        for doc in documents
    ]


class ManifestCollector(BaseCallbackHandler):
    """A callback handler that keeps the manifests of the retriever calls it is passed to.

    Make one per call (or per request): it belongs to its caller, unlike the shared retriever.

    Attributes:
        manifests: One JSON dict per call, in the order the calls ended; match documents to
            theirs by ``metadata["ragtiller_run_id"] == manifest["run_id"]``.

    Example:
        >>> collector = ManifestCollector()
        >>> docs = retriever.invoke(question, config={"callbacks": [collector]})  # doctest: +SKIP
        >>> collector.manifests[0]["query_type"]  # doctest: +SKIP
        'factual_lookup'
    """

    run_inline = True

    def __init__(self) -> None:
        self.manifests: list[dict[str, Any]] = []

    def on_custom_event(self, name: str, data: Any, **kwargs: Any) -> None:
        if name == MANIFEST_EVENT:
            self.manifests.append(data)


class RagtillerRetriever(BaseRetriever):
    """The retrieval graph as a LangChain retriever: one graph turn per ``invoke``.

    Returns the turn's ``documents``, best first, each with its own scores and provenance in
    its metadata and ``"ragtiller_run_id"``, the turn it came from. The turn's run manifest is
    sent once per call, as a JSON dict, in the custom callback event ``"ragtiller_manifest"``
    of the retriever's run: pass a :class:`ManifestCollector` (or any handler's
    ``on_custom_event``) in the call's ``callbacks``, or read it from ``astream_events``. So a
    retriever shared by concurrent callers keeps no per-call state. A turn that retrieves
    nothing (a greeting, an empty query) returns ``[]``; its manifest says why.

    Settings follow LangChain's retrievers: ``k`` (documents returned) and ``search_kwargs``
    (``k`` and any :class:`~ragtiller.policies.run_context.RunContext` field: ``policy``,
    ``max_chunks``, ``namespace``, ``tenant``, ``step_back``, ``rerank``), checked when the
    retriever is made; ``retriever.invoke(query, k=2)`` overrides them for one call. They
    reach the graph under ``configurable["ragtiller"]``, so the manifest records them under
    ``overrides``, and a parent's own ``configurable`` keys never change them.

    Attributes:
        graph: A compiled ragtiller graph (from :func:`ragtiller.build_graph`), without a
            checkpointer: a retriever call passes no ``thread_id``.
        k: Documents returned per call (the run context's ``top_k``); None: the route's.
        search_kwargs: Run-context settings for every call.
        namespace: Overrides the route's namespace(s) on every call.
        tenant: Tenant id passed on every call (recorded and used as a tier filter).

    Example:
        >>> retriever = as_retriever(graph, k=3, search_kwargs={"tenant": "acme"})  # doctest: +SKIP
        >>> collector = ManifestCollector()  # doctest: +SKIP
        >>> docs = retriever.invoke("how do I cancel a task?", config={"callbacks": [collector]})  # doctest: +SKIP
        >>> collector.manifests[0]["query_type"]  # doctest: +SKIP
        'factual_lookup'
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    graph: Runnable[Any, Any]
    k: int | None = Field(None, strict=True)  # as the run context's top_k: "3", 3.0, True refused
    search_kwargs: dict[str, Any] = Field(default_factory=dict)
    namespace: Namespace = None
    tenant: str | None = None

    @model_validator(mode="after")
    def _valid_settings(self) -> RagtillerRetriever:
        self.context()
        return self

    def context(self, **call: Any) -> RunContext:
        """The run context of a call: the retriever's settings, then the call's ``call``.

        Raises:
            InputError: The call sets a tenant, namespace or filter other than the one the
                retriever was made with: a shared retriever's scope is not the caller's to
                widen (default deny).
        """
        merged = {**self.search_kwargs, **call}
        made = run_context(
            self.search_kwargs, k=self.k, namespace=self.namespace, tenant=self.tenant
        )
        asked = run_context(
            merged,
            k=None if "k" in call else self.k,
            namespace=None if "namespace" in call else self.namespace,
            tenant=None if "tenant" in call else self.tenant,
        )
        changed = [
            field
            for field in SCOPE_FIELDS
            if getattr(made, field) is not None and getattr(asked, field) != getattr(made, field)
        ]
        if changed:
            raise InputError(
                f"this retriever was made for one {' and '.join(changed)}; a call may not "
                "change it (make another retriever)"
            )
        return asked

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **call: Any
    ) -> list[Document]:
        callbacks = run_manager.get_child()
        out = self.graph.invoke(
            {"query": query},
            config={
                "callbacks": callbacks,
                "configurable": {CONFIG_KEY: self.context(**call).overrides()},
            },
        )
        documents, _, manifest = _output(out)
        callbacks.on_custom_event(MANIFEST_EVENT, manifest, run_id=run_manager.run_id)
        return _with_run_id(documents, manifest)

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **call: Any
    ) -> list[Document]:
        callbacks = run_manager.get_child()
        out = await self.graph.ainvoke(
            {"query": query},
            config={
                "callbacks": callbacks,
                "configurable": {CONFIG_KEY: self.context(**call).overrides()},
            },
        )
        documents, _, manifest = _output(out)
        await callbacks.on_custom_event(MANIFEST_EVENT, manifest, run_id=run_manager.run_id)
        return _with_run_id(documents, manifest)


def as_retriever(graph: Runnable[Any, Any], **defaults: Any) -> RagtillerRetriever:
    """Wrap a compiled retrieval graph as a LangChain ``BaseRetriever``.

    Args:
        graph: What :func:`ragtiller.build_graph` returned.
        **defaults: Fields of :class:`RagtillerRetriever` (``k``, ``search_kwargs``,
            ``namespace``, ``tenant``) and of ``BaseRetriever`` (``tags``, ``metadata``).

    Returns:
        The retriever; see :class:`RagtillerRetriever` for how a call's manifest is sent.

    Raises:
        pydantic.ValidationError: An unknown or ill-typed default (the message names it),
            including an unknown ``search_kwargs`` key or a bad value for one.

    Example:
        >>> from ragtiller import build_graph
        >>> retriever = as_retriever(build_graph(index=index))  # doctest: +SKIP
        >>> [d.metadata["citation"] for d in retriever.invoke("what is a coroutine?")]  # doctest: +SKIP
        [1, 2, 3]
    """
    return RagtillerRetriever(graph=graph, **defaults)


class SearchArgs(BaseModel):
    """What the model passes to the search tool."""

    query: str = Field(description="The user's question, in their own words.")


def as_tool(
    graph: Runnable[Any, Any],
    *,
    name: str = DEFAULT_TOOL_NAME,
    description: str = DEFAULT_TOOL_DESCRIPTION,
    namespace: Namespace = None,
    tenant: str | None = None,
    k: int | None = None,
    search_kwargs: Mapping[str, Any] | None = None,
) -> StructuredTool:
    """Wrap a compiled retrieval graph as a LangChain tool for agents.

    The tool's ``response_format`` is ``"content_and_artifact"``: the model reads the cited
    context (``[1] source ...``; when nothing was retrieved, a line saying why), and the
    ``ToolMessage.artifact`` holds ``{"documents": [Document, ...], "manifest": {...}}`` with
    the manifest as a JSON dict, for the application rather than the model.

    Args:
        graph: What :func:`ragtiller.build_graph` returned.
        name: The tool name the model calls.
        description: What the model is told the tool does.
        namespace: Overrides the route's namespace(s) on every call.
        tenant: Tenant id passed on every call.
        k: Documents returned per call; None: the route's.
        search_kwargs: Run-context settings for every call, as for :func:`as_retriever`.

    Returns:
        A tool with a sync and a native async path.

    Raises:
        InputError: An unknown ``search_kwargs`` key or a bad value (checked here, once).

    Example:
        >>> from langchain.agents import create_agent
        >>> agent = create_agent(model, [as_tool(graph)])  # doctest: +SKIP
        >>> agent.invoke({"messages": [("user", "how do I cancel a task?")]})  # doctest: +SKIP
    """

    def result(out: Any) -> tuple[str, dict[str, Any]]:
        documents, context, manifest = _output(out)
        content = answer_text(context, manifest.get("no_retrieval_reason"))
        return content, {"documents": documents, "manifest": manifest}

    # the settings travel under ``configurable["ragtiller"]``, which any Runnable accepts
    settings = run_context(search_kwargs, k=k, namespace=namespace, tenant=tenant)
    config: RunnableConfig = {"configurable": {CONFIG_KEY: settings.overrides()}}

    def search(query: str) -> tuple[str, dict[str, Any]]:
        return result(graph.invoke({"query": query}, config=config))

    async def asearch(query: str) -> tuple[str, dict[str, Any]]:
        return result(await graph.ainvoke({"query": query}, config=config))

    return StructuredTool.from_function(
        func=search,
        coroutine=asearch,
        name=name,
        description=description,
        args_schema=SearchArgs,
        response_format="content_and_artifact",
    )


__all__ = (
    "DEFAULT_TOOL_DESCRIPTION",
    "DEFAULT_TOOL_NAME",
    "MANIFEST_EVENT",
    "RUN_ID_KEY",
    "SEARCH_KWARGS",
    "ManifestCollector",
    "RagtillerRetriever",
    "SearchArgs",
    "as_retriever",
    "as_tool",
    "run_context",
)
