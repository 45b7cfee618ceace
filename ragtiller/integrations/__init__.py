"""What ragtiller offers other tools: a LangChain retriever and tool, LangGraph Studio graphs,
the indexing graph, the deployment diagram and plain-text views of a turn."""

from ragtiller.integrations.langchain import (
    DEFAULT_TOOL_DESCRIPTION,
    DEFAULT_TOOL_NAME,
    MANIFEST_EVENT,
    RUN_ID_KEY,
    SEARCH_KWARGS,
    ManifestCollector,
    RagtillerRetriever,
    SearchArgs,
    as_retriever,
    as_tool,
    run_context,
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
