"""LangChain adapters: the retrieval graph as a ``BaseRetriever`` and as an agent tool.

Both run the compiled graph itself (``invoke`` on the sync path, ``ainvoke`` on the async one),
so an agent's retrieval takes the same policy, quota and rerank decisions as any other caller,
and each call carries its own run manifest: nothing is stored on the shared retriever or tool.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import Runnable
from langchain_core.tools import StructuredTool
from pydantic import BaseModel, ConfigDict, Field

from ragtiller.errors import ConfigurationError
from ragtiller.manifest import RunManifest

MANIFEST_KEY = "ragtiller_manifest"
"""Document metadata key under which :class:`RagtillerRetriever` puts the turn's manifest."""

DEFAULT_TOOL_NAME = "search_docs"
DEFAULT_TOOL_DESCRIPTION = (
    "Search the indexed documentation. Input: the user's question in their own words. "
    "Returns passages numbered [1], [2], ...; cite them by number in the answer."
)

Namespace = str | list[str] | None
"""A namespace, several, or None for the route's own."""


def _inputs(query: str, namespace: Namespace, tenant: str | None) -> dict[str, Any]:
    """The graph input for one turn; unset options are left out so the route decides."""
    inputs: dict[str, Any] = {"query": query}
    if namespace is not None:
        inputs["namespace"] = namespace
    if tenant is not None:
        inputs["tenant"] = tenant
    return inputs


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


def _with_manifest(documents: list[Document], manifest: dict[str, Any]) -> list[Document]:
    """Copies of ``documents`` whose metadata also holds the manifest (one shared dict)."""
    return [
        doc.model_copy(update={"metadata": {**doc.metadata, MANIFEST_KEY: manifest}})
        for doc in documents
    ]


class RagtillerRetriever(BaseRetriever):
    """The retrieval graph as a LangChain retriever: one graph turn per ``invoke``.

    Returns the turn's ``documents``, best first. Every document's metadata also holds the
    turn's run manifest, as a JSON dict, under ``"ragtiller_manifest"`` (the same dict object
    for all documents of a call), so the manifest travels with the result and a retriever shared
    by concurrent callers keeps no per-call state. A turn that retrieves nothing (a greeting, an
    empty query) returns ``[]``; run the graph or use :func:`as_tool` to see why.

    Attributes:
        graph: A compiled ragtiller graph (from :func:`ragtiller.build_graph`), without a
            checkpointer: a retriever call passes no ``thread_id``.
        namespace: Overrides the route's namespace(s) on every call.
        tenant: Tenant id passed on every call (recorded and used as a tier filter).

    Example:
        >>> retriever = as_retriever(graph, tenant="acme")  # doctest: +SKIP
        >>> docs = retriever.invoke("how do I cancel a task?")  # doctest: +SKIP
        >>> docs[0].metadata["ragtiller_manifest"]["query_type"]  # doctest: +SKIP
        'factual_lookup'
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    graph: Runnable[Any, Any]
    namespace: Namespace = None
    tenant: str | None = None

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        out = self.graph.invoke(
            _inputs(query, self.namespace, self.tenant),
            config={"callbacks": run_manager.get_child()},
        )
        documents, _, manifest = _output(out)
        return _with_manifest(documents, manifest)

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        out = await self.graph.ainvoke(
            _inputs(query, self.namespace, self.tenant),
            config={"callbacks": run_manager.get_child()},
        )
        documents, _, manifest = _output(out)
        return _with_manifest(documents, manifest)


def as_retriever(graph: Runnable[Any, Any], **defaults: Any) -> RagtillerRetriever:
    """Wrap a compiled retrieval graph as a LangChain ``BaseRetriever``.

    Args:
        graph: What :func:`ragtiller.build_graph` returned.
        **defaults: Fields of :class:`RagtillerRetriever` (``namespace``, ``tenant``) and of
            ``BaseRetriever`` (``tags``, ``metadata``).

    Returns:
        The retriever; see :class:`RagtillerRetriever` for where the manifest goes.

    Raises:
        pydantic.ValidationError: An unknown or ill-typed default (the message names it).

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

    Returns:
        A tool with a sync and a native async path.

    Example:
        >>> from langchain.agents import create_agent
        >>> agent = create_agent(model, [as_tool(graph)])  # doctest: +SKIP
        >>> agent.invoke({"messages": [("user", "how do I cancel a task?")]})  # doctest: +SKIP
    """

    def result(out: Any) -> tuple[str, dict[str, Any]]:
        documents, context, manifest = _output(out)
        reason = manifest.get("no_retrieval_reason") or "nothing matched"
        content = context or f"No documents retrieved ({reason})."
        return content, {"documents": documents, "manifest": manifest}

    def search(query: str) -> tuple[str, dict[str, Any]]:
        return result(graph.invoke(_inputs(query, namespace, tenant)))

    async def asearch(query: str) -> tuple[str, dict[str, Any]]:
        return result(await graph.ainvoke(_inputs(query, namespace, tenant)))

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
    "MANIFEST_KEY",
    "RagtillerRetriever",
    "SearchArgs",
    "as_retriever",
    "as_tool",
)
