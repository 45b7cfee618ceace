"""The retrieval graph as a LangChain ``BaseRetriever`` and as an agent tool (docs/usage.md): both
run the graph itself, so an agent takes the same policy, quota and rerank decisions as any caller;
each call delivers its own manifest, and nothing is stored on the shared retriever or tool.
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

MANIFEST_EVENT = "ragtiller_manifest"  # the custom callback event of a retriever call's manifest
RUN_ID_KEY = "ragtiller_run_id"  # document metadata: the turn (manifest run_id) it came from

DEFAULT_TOOL_NAME = "search_docs"
DEFAULT_TOOL_DESCRIPTION = (
    "Search the indexed documentation. Input: the user's question in their own words. "
    "Returns passages numbered [1], [2], ...; cite them by number in the answer."
)

Namespace = str | list[str] | None
SCOPE_FIELDS = ("tenant", "namespace", "filter")  # fixed once a retriever sets them
SEARCH_KWARGS = ("k", *RunContext.model_fields)  # k: LangChain's name for top_k


def run_context(
    search_kwargs: Mapping[str, Any] | None = None,
    *,
    k: int | None = None,
    namespace: Namespace = None,
    tenant: str | None = None,
) -> RunContext:
    """``search_kwargs``, the explicit arguments over them, as one call's run context."""
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
    if not isinstance(out, Mapping) or not {"documents", "context", "manifest"} <= set(out):
        keys = sorted(out) if isinstance(out, Mapping) else type(out).__name__
        raise ConfigurationError(
            "expected a ragtiller graph (output keys documents, context, manifest), but its "
            f"output was {keys}; pass the graph ragtiller.build_graph returns"
        )
    manifest = RunManifest.model_validate(out["manifest"]).model_dump(mode="json")
    return list(out["documents"]), str(out["context"]), manifest


class ManifestCollector(BaseCallbackHandler):
    """The manifests of the retriever calls it is passed to (the caller's own), as they end."""

    run_inline = True

    def __init__(self) -> None:
        self.manifests: list[dict[str, Any]] = []

    def on_custom_event(self, name: str, data: Any, **kwargs: Any) -> None:
        if name == MANIFEST_EVENT:
            self.manifests.append(data)


class RagtillerRetriever(BaseRetriever):
    """One graph turn per ``invoke`` (``graph`` without a checkpointer: no ``thread_id``), its
    manifest sent as the callback event ``ragtiller_manifest``; a call may override ``k`` and
    ``search_kwargs``, never widen the tenant, namespace or filter the retriever was made for."""

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
        made = run_context(
            self.search_kwargs, k=self.k, namespace=self.namespace, tenant=self.tenant
        )
        asked = run_context(
            {**self.search_kwargs, **call},
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

    def _config(self, callbacks: Any, call: dict[str, Any]) -> RunnableConfig:
        return {
            "callbacks": callbacks,
            "configurable": {CONFIG_KEY: self.context(**call).overrides()},
        }

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **call: Any
    ) -> list[Document]:
        callbacks = run_manager.get_child()
        out = self.graph.invoke({"query": query}, config=self._config(callbacks, call))
        documents, _, manifest = _output(out)
        callbacks.on_custom_event(MANIFEST_EVENT, manifest, run_id=run_manager.run_id)
        return _with_run_id(documents, manifest)

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **call: Any
    ) -> list[Document]:
        callbacks = run_manager.get_child()
        out = await self.graph.ainvoke({"query": query}, config=self._config(callbacks, call))
        documents, _, manifest = _output(out)
        await callbacks.on_custom_event(MANIFEST_EVENT, manifest, run_id=run_manager.run_id)
        return _with_run_id(documents, manifest)


def _with_run_id(documents: list[Document], manifest: dict[str, Any]) -> list[Document]:
    update = {RUN_ID_KEY: manifest["run_id"]}
    return [doc.model_copy(update={"metadata": {**doc.metadata, **update}}) for doc in documents]


def as_retriever(graph: Runnable[Any, Any], **defaults: Any) -> RagtillerRetriever:
    """Wrap a compiled retrieval graph as a LangChain ``BaseRetriever`` (``defaults``: its fields)."""
    return RagtillerRetriever(graph=graph, **defaults)


class SearchArgs(BaseModel):
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
    """Wrap a compiled retrieval graph as an agent tool: the model reads the cited context, the
    application the artifact ``{"documents": [...], "manifest": {...}}``."""

    def result(out: Any) -> tuple[str, dict[str, Any]]:
        documents, context, manifest = _output(out)
        content = answer_text(context, manifest.get("no_retrieval_reason"))
        return content, {"documents": documents, "manifest": manifest}

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
