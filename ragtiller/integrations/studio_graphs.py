"""What ``langgraph.json`` points at. ``langgraph dev`` executes a graph's file once per graph,
each time as a new module: defined here, each graph would get its own index, quota ledger and
cache; imported from :mod:`ragtiller.integrations.studio`, they share one."""

from ragtiller.integrations.studio import make_graph, make_indexing_graph, make_no_llm_graph

__all__ = ("make_graph", "make_indexing_graph", "make_no_llm_graph")
