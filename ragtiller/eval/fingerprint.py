"""Fingerprints that make evidence travel: which dataset files and which index a run measured.

A promotion decision is only evidence for the index and data it was measured on. Runs carry
these fingerprints, :func:`~ragtiller.eval.compare.compare_runs` refuses to pair runs whose
fingerprints differ, and promotion artifacts record them. The index fingerprint names how its
vectors were computed and what the queries were embedded on (the query embedder's variant,
onnxruntime's version, the CPU's integer features), so figures from two machines are never
paired, and an artifact says which machine it came from.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ragtiller.eval.datasets import EvalDataset, dataset_sha256
from ragtiller.models.embedders import embedder_variant
from ragtiller.models.onnx_model import runtime_environment


def file_sha256(path: Path) -> str:
    """sha256 of one file's bytes."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def dataset_fingerprint(dataset: EvalDataset) -> dict[str, Any]:
    """The dataset's name, kind, split, query count and the sha256 of each of its files.

    An entry covering several files (a QA collection's ``docs/``) gets one hash over all of
    them (see :func:`~ragtiller.eval.datasets.dataset_sha256`).
    """
    return {
        "name": dataset.name,
        "kind": dataset.kind,
        "split": dataset.split,
        "sha256": dataset.sha256,
        "n_queries": len(dataset.queries),
        "files": {
            name: file_sha256(paths[0]) if len(paths) == 1 else dataset_sha256(paths)
            for name, paths in dataset.files.items()
        },
    }


def index_fingerprint(index: Any) -> dict[str, Any] | None:
    """What an index was built with (embedder and its variant, chunking, BM25, counts), a hash
    of its chunks, and what its queries are embedded with here (``queries``: the embedder's
    variant, onnxruntime's version, the machine and its CPU's integer features).

    The chunk hash covers every chunk id in row order; ids hash the chunk text, so a re-ingest
    of the same corpus with the same settings gives the same fingerprint and anything else does
    not. Returns None for an object without a manifest (tiers passed by hand).
    """
    manifest = getattr(index, "manifest", None)
    store = getattr(index, "store", None)
    if manifest is None or store is None:
        return None
    ids = store.records.ids
    return {
        "embedder": manifest.embedder.model_dump(mode="json"),
        "embedder_variant": manifest.embedder_variant,
        "chunking": manifest.chunking.model_dump(mode="json"),
        "lexical": manifest.lexical.model_dump(mode="json"),
        "counts": manifest.counts.model_dump(mode="json"),
        "chunks_sha256": hashlib.sha256("\n".join(ids).encode()).hexdigest(),
        "queries": {
            "embedder_variant": embedder_variant(index.embedder),
            **runtime_environment(),
        },
    }


def same_index(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> bool:
    """Whether two fingerprints name the same index (None: built from tiers passed by hand)."""
    return (None if a is None else dict(a)) == (None if b is None else dict(b))
