"""The graph's shape, drawn from placeholder components: Mermaid (``ragtiller draw``), or a PNG
rendered offline by Graphviz (LangGraph's PNG renderer calls a web service)."""

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
    return str(shape_graph().draw_mermaid())


def png(path: str | None = None) -> bytes | None:
    """The graph as a PNG (``ragtiller[draw]``): written to ``path``, or returned.

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
