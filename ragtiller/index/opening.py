"""Open a saved index with the embedder its manifest names (what the CLI commands need)."""

from __future__ import annotations

import re
from pathlib import Path

from langchain_core.embeddings import Embeddings
from pydantic import ValidationError

from ragtiller.errors import IndexError_
from ragtiller.index.embedded import EmbeddedIndex
from ragtiller.index.embedders import HashingEmbedder, MiniLMEmbedder, local_embedder
from ragtiller.index.manifest import MANIFEST_FILE, EmbedderInfo, IndexManifest

_HASHING = re.compile(r"ragtiller/hashing-v1-ngram(?P<weight>\d+(?:\.\d+)?(?:e-?\d+)?)")


def embedder_for(info: EmbedderInfo) -> Embeddings:
    """The embedder an index manifest names: bundled MiniLM or the hashing test embedder.

    Raises:
        IndexError_: Any other embedder; open such an index in Python with ``EmbeddedIndex.load``.
    """
    if info.name == MiniLMEmbedder.model_name:
        return local_embedder()
    match = _HASHING.fullmatch(info.name)
    if match:
        return HashingEmbedder(info.dimension, ngram_weight=float(match["weight"]))
    raise IndexError_(
        f"the index was built with embedder {info.name!r}, which the command line cannot "
        "construct; load it in Python with EmbeddedIndex.load(dir, embedder=...)"
    )


def open_index(directory: str | Path) -> EmbeddedIndex:
    """Load the index in ``directory`` with the embedder recorded in its manifest.

    Raises:
        IndexError_: No readable manifest, an unknown embedder, or a corrupt index.
    """
    manifest_file = Path(directory) / MANIFEST_FILE
    try:
        manifest = IndexManifest.model_validate_json(manifest_file.read_bytes())
    except FileNotFoundError as e:
        raise IndexError_(f"no index at {directory}: {MANIFEST_FILE} not found") from e
    except (OSError, ValidationError) as e:
        raise IndexError_(f"index file {manifest_file} is unreadable or corrupt") from e
    return EmbeddedIndex.load(directory, embedder=embedder_for(manifest.embedder))
