"""Which dataset and index a run measured, and whether the index holds the dataset at all.

A decision is evidence only for the index and data it was measured on (and the machine: the
query embedder's variant, onnxruntime, the CPU's features), so runs carry fingerprints and
:func:`~ragtiller.eval.promotion.compare_runs` refuses to pair runs whose fingerprints differ.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragtiller.errors import EvalError
from ragtiller.eval.datasets import EvalDataset, dataset_sha256
from ragtiller.models.embedders import embedder_variant
from ragtiller.models.onnx_model import runtime_environment


def file_sha256(path: Path) -> str:
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def dataset_fingerprint(dataset: EvalDataset, *, files: bool = True) -> dict[str, Any]:
    """The dataset's name, kind, split, hash, query count and (``files``) each file's sha256."""
    fingerprint: dict[str, Any] = {
        "name": dataset.name,
        "kind": dataset.kind,
        "split": dataset.split,
        "sha256": dataset.sha256,
        "n_queries": len(dataset.queries),
    }
    if files:
        fingerprint["files"] = {
            name: file_sha256(paths[0]) if len(paths) == 1 else dataset_sha256(paths)
            for name, paths in dataset.files.items()
        }
    return fingerprint


def index_fingerprint(index: Any) -> dict[str, Any] | None:
    """What an index was built with, a hash of its chunk ids (which hash the text), and what
    its queries are embedded with here; None without a manifest (tiers passed by hand)."""
    manifest = getattr(index, "manifest", None)
    store = getattr(index, "store", None)
    if manifest is None or store is None:
        return None
    return {
        "embedder": manifest.embedder.model_dump(mode="json"),
        "embedder_variant": manifest.embedder_variant,
        "chunking": manifest.chunking.model_dump(mode="json"),
        "lexical": manifest.lexical.model_dump(mode="json"),
        "counts": manifest.counts.model_dump(mode="json"),
        "chunks_sha256": hashlib.sha256("\n".join(store.records.ids).encode()).hexdigest(),
        "queries": {"embedder_variant": embedder_variant(index.embedder), **runtime_environment()},
    }


def same_index(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> bool:
    return (None if a is None else dict(a)) == (None if b is None else dict(b))


@dataclass(frozen=True)
class Coverage:
    """How many of the dataset's documents the index holds."""

    found: int
    total: int

    def line(self, dataset: EvalDataset) -> str:
        what = "judged documents" if dataset.kind == "documents" else "documents under docs/"
        return f"index holds {self.found} of the dataset's {self.total} {what}"


def index_doc_ids(index: Any) -> list[str]:
    """The distinct ``doc_id`` of every chunk of an embedded index (first-appearance order)."""
    records = index.store.records
    ids = (
        str(md.get("doc_id") or rid) for rid, md in zip(records.ids, records.metadatas, strict=True)
    )
    return list(dict.fromkeys(ids))


def check_coverage(dataset: EvalDataset, doc_ids: Iterable[str]) -> Coverage:
    """Count the dataset's documents among the index's ``doc_ids``; none is an error, as every
    metric would be 0."""
    seen = list(doc_ids)
    held = {dataset.document_key(doc_id) for doc_id in seen}
    coverage = Coverage(len(dataset.documents & held), len(dataset.documents))
    if coverage.total and not coverage.found:
        ours = ", ".join(repr(d) for d in seen[:3]) or "none: the index is empty"
        theirs = ", ".join(repr(d) for d in sorted(dataset.documents)[:3])
        source = "its corpus.jsonl" if dataset.kind == "documents" else "its docs/ folder"
        raise EvalError(
            f"the index and dataset {dataset.name} share no document (index: {ours}; "
            f"dataset: {theirs}); every metric would be 0. Ingest {source} into the index"
        )
    return coverage
