"""Print the graph's shape as Mermaid (``ragtiller draw``), or render a PNG offline.

The shape does not depend on the components, so it is drawn from placeholders: nothing is
loaded, no model, no index. PNGs are rendered locally by Graphviz through pygraphviz
(``pip install 'ragtiller[draw]'``); LangGraph's Mermaid PNG renderer, and a compiled graph's
notebook display, call a web service, which we never do.
"""

from __future__ import annotations

from typing import Any

from ragtiller.core.tiers import CHAT_RESOURCE
from ragtiller.errors import ConfigurationError
from ragtiller.graph.builder import compile_graph
from ragtiller.nodes.components import Components
from ragtiller.policies.loader import load_policy
from ragtiller.rerankers import IdentityReranker
from ragtiller.stores import MemoryCache, MemoryQuotaLedger


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


def png(path: str | None = None) -> bytes | None:
    """The graph as a PNG, rendered offline by Graphviz: written to ``path``, or returned.

    Raises:
        ConfigurationError: pygraphviz is not installed (the message says how to install it).

    Example:
        >>> from IPython.display import Image  # doctest: +SKIP
        >>> Image(png())  # doctest: +SKIP
    """
    try:
        import pygraphviz  # noqa: F401
    except ImportError as e:
        raise ConfigurationError(
            "drawing a PNG needs pygraphviz: pip install 'ragtiller[draw]' "
            "(it compiles against Graphviz: apt-get install graphviz libgraphviz-dev)"
        ) from e
    result = shape_graph().draw_png(path)
    return result if isinstance(result, bytes) else None
