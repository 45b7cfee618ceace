"""Open a saved index with the embedder its manifest names (what the CLI commands need)."""

from __future__ import annotations

import re
from pathlib import Path

from langchain_core.embeddings import Embeddings

from ragtiller.errors import IndexStoreError
from ragtiller.index.embedded import EmbeddedIndex, read_manifest
from ragtiller.index.manifest import MANIFEST_FILE, EmbedderInfo
from ragtiller.index.versions import open_current
from ragtiller.models.embedders import HashingEmbedder, MiniLMEmbedder, local_embedder

_HASHING = re.compile(r"ragtiller/hashing-v1-ngram(?P<weight>\d+(?:\.\d+)?(?:e-?\d+)?)")


def embedder_for(info: EmbedderInfo) -> Embeddings:
    """The embedder an index manifest names: bundled MiniLM or the hashing test embedder.

    Raises:
        IndexStoreError: Any other embedder; open such an index in Python with ``EmbeddedIndex.load``.
    """
    if info.name == MiniLMEmbedder.model_name:
        return local_embedder()
    match = _HASHING.fullmatch(info.name)
    if match:
        return HashingEmbedder(info.dimension, ngram_weight=float(match["weight"]))
    raise IndexStoreError(
        f"the index was built with embedder {info.name!r}, which the command line cannot "
        "construct; load it in Python with EmbeddedIndex.load(dir, embedder=...)"
    )


def open_index(directory: str | Path) -> EmbeddedIndex:
    """Load the index in ``directory`` with the embedder recorded in its manifest.

    Raises:
        IndexStoreError: No readable manifest, an unknown embedder, or a corrupt index.
    """
    return open_current(Path(directory), _open_version)


def _open_version(version: Path) -> EmbeddedIndex:
    manifest = read_manifest(version / MANIFEST_FILE)
    return EmbeddedIndex._load_version(version, embedder_for(manifest.embedder))
