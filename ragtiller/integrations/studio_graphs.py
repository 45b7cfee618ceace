"""What ``langgraph.json`` points at: the Studio graph factories of :mod:`ragtiller.integrations.studio`.

``langgraph dev`` executes a graph's file once per graph it serves, each time as a new module
named after the path. Were the factories defined here, each graph would get its own copy of
their state: its own index, quota ledger and cache, and an ingest by the indexing graph would
not reach the retrieval graphs. Imported from the package module, they share one.
"""

from ragtiller.integrations.studio import make_graph, make_indexing_graph, make_no_llm_graph

__all__ = ("make_graph", "make_indexing_graph", "make_no_llm_graph")
