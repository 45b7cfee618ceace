"""Print the graph's shape as Mermaid (``python -m ragtiller.graph.draw``), or render a PNG.

The shape does not depend on the components, so it is drawn from placeholders: nothing is
loaded, no model, no index. ``--png`` renders offline through Graphviz when pygraphviz is
installed (LangGraph's Mermaid PNG renderer calls a web service, which we never do).
"""

from __future__ import annotations

import argparse
from typing import Any

from ragtiller.graph.builder import compile_graph
from ragtiller.nodes.components import Components
from ragtiller.policies.loader import load_policy
from ragtiller.rerankers import IdentityReranker
from ragtiller.stores import MemoryCache, MemoryQuotaLedger
from ragtiller.types import CHAT_RESOURCE


def shape_graph() -> Any:
    """The compiled graph's drawable form, built from placeholder components."""
    deps = Components(
        policy=load_policy(),
        embedder=None,
        tiers={},
        quota=MemoryQuotaLedger({CHAT_RESOURCE: 0}),
        cache=MemoryCache(),
        chat_model=None,
        reranker=IdentityReranker(),
    )
    return compile_graph(deps).get_graph()


def mermaid() -> str:
    """The graph as Mermaid text (the README and the snapshot test use this)."""
    return str(shape_graph().draw_mermaid())


def main(argv: list[str] | None = None) -> None:
    """Print Mermaid, or write a PNG with ``--png FILE``."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--png", help="write a PNG here (needs pygraphviz)")
    args = parser.parse_args(argv)
    if args.png:
        shape_graph().draw_png(args.png)
    else:
        print(mermaid(), end="")


if __name__ == "__main__":
    main()
