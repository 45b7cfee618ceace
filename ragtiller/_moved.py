"""Old import paths that keep working for one release, with a ``DeprecationWarning`` naming the new one.

Two kinds: whole modules that moved (``import ragtiller.fusion`` gives
:mod:`ragtiller.ranking.fusion`), answered by a finder on ``sys.meta_path`` that hands back the
new module itself; and names that left a package (``from ragtiller.index import ingest``),
answered by the package's ``__getattr__`` (:func:`moved_names`), as ``langgraph.constants`` does.
The test suite runs with ``filterwarnings = error``, so no code inside ragtiller can use either.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from collections.abc import Callable, Mapping, Sequence
from types import ModuleType
from typing import Any

REMOVED_IN = "0.3.0"

MOVED_MODULES: dict[str, str] = {
    "ragtiller.types": "ragtiller.core.tiers",
    "ragtiller.records": "ragtiller.core.turn",
    "ragtiller.filters": "ragtiller.core.filters",
    "ragtiller.manifest": "ragtiller.core.run_manifest",
    "ragtiller.redact": "ragtiller.core.redact",
    "ragtiller._retry": "ragtiller.core.retry",
    "ragtiller.bulkhead": "ragtiller.core.bulkhead",
    "ragtiller.breaker": "ragtiller.core.breaker",
    "ragtiller.providers": "ragtiller.core.providers",
    "ragtiller.policies.router": "ragtiller.routing.rules",
    "ragtiller.policies.commands": "ragtiller.cli.policy",
    "ragtiller.routing.llm_router": "ragtiller.routing.llm",
    "ragtiller.fusion": "ragtiller.ranking.fusion",
    "ragtiller.doc_ranking": "ragtiller.ranking.documents",
    "ragtiller.passages": "ragtiller.ranking.passages",
    "ragtiller.feedback": "ragtiller.ranking.feedback",
    "ragtiller.query_tiers": "ragtiller.ranking.query_tiers",
    "ragtiller.graph.state": "ragtiller.nodes.state",
    "ragtiller.graph.checkpoint": "ragtiller.nodes.channels",
    "ragtiller.nodes.report": "ragtiller.nodes.turn_manifest",
    "ragtiller.eval.report": "ragtiller.eval.summary",
    "ragtiller.eval.commands": "ragtiller.cli.eval",
    "ragtiller.studio": "ragtiller.integrations.studio",
    "ragtiller.studio_graphs": "ragtiller.integrations.studio_graphs",
    "ragtiller.deployment": "ragtiller.integrations.deployment",
    "ragtiller.indexing_graph": "ragtiller.integrations.indexing_graph",
    "ragtiller.display": "ragtiller.integrations.display",
    "ragtiller.exit_codes": "ragtiller.cli.exit_codes",
    "ragtiller.demo": "ragtiller.integrations.demo",
    "ragtiller.index.embedders": "ragtiller.models.embedders",
    "ragtiller.index.onnx_embedder": "ragtiller.models.onnx_embedder",
    "ragtiller.index.onnx_model": "ragtiller.models.onnx_model",
    "ragtiller.index.onnx_export": "ragtiller.models.onnx_export",
    "ragtiller.index.sources": "ragtiller.ingest.sources",
    "ragtiller.index.chunking": "ragtiller.ingest.chunking",
    "ragtiller.index.sync": "ragtiller.ingest.store_sync",
    "ragtiller.index.progress": "ragtiller.ingest.progress",
    "ragtiller.index.report": "ragtiller.ingest.report",
    "ragtiller.index.record_manager": "ragtiller.ingest.record_manager",
    "ragtiller.index.ingesting": "ragtiller.ingest.pipeline",
    "ragtiller.index.store_ingest": "ragtiller.ingest.to_store",
    "ragtiller.index.doc_ids": "ragtiller.ingest.doc_ids",
    "ragtiller.index.stdlib_corpus": "ragtiller.ingest.stdlib_corpus",
    "ragtiller.index.pinecone": "ragtiller.pinecone",
    "ragtiller.index.pinecone_calls": "ragtiller.pinecone.calls",
    "ragtiller.index.pinecone_dense": "ragtiller.pinecone.dense",
    "ragtiller.index.pinecone_env": "ragtiller.pinecone.env",
    "ragtiller.index.pinecone_lexical": "ragtiller.pinecone.lexical",
    "ragtiller.index.pinecone_stats": "ragtiller.pinecone.stats",
    "ragtiller.index.pinecone_sync": "ragtiller.pinecone.index_sync",
    "ragtiller.index.pinecone_upsert": "ragtiller.pinecone.upsert",
    "ragtiller.index.sparse_bm25": "ragtiller.pinecone.sparse_bm25",
    "ragtiller.index.backends": "ragtiller.graph.backends",
}
"""Public modules of 0.1 that moved in 0.2, old path -> new path."""


def warn_moved(old: str, new: str) -> None:
    """Warn that ``old`` is deprecated in favour of ``new``."""
    warnings.warn(
        f"{old} moved to {new}; the old path is removed in ragtiller {REMOVED_IN}",
        DeprecationWarning,
        stacklevel=3,
    )


class _MovedModuleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Answers an import of an old module path with the module at its new path."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MOVED_MODULES:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        new = MOVED_MODULES[spec.name]
        warn_moved(spec.name, new)
        return importlib.import_module(new)

    def exec_module(self, module: ModuleType) -> None:
        """The new module is already executed."""


def install() -> None:
    """Put the finder first on ``sys.meta_path`` (once)."""
    if not any(isinstance(f, _MovedModuleFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _MovedModuleFinder())


def moved_names(package: str, moved: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for names that left ``package``: warns, then returns the name
    from its new module (``moved`` maps name -> new module)."""

    def __getattr__(name: str) -> Any:
        new = moved.get(name)
        if new is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        warn_moved(f"{package}.{name}", f"{new}.{name}")
        return getattr(importlib.import_module(new), name)

    return __getattr__
