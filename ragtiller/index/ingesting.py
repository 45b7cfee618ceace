"""The ingest door: build a new index, or bring an existing one up to date, and save it."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

from langchain_core.embeddings import Embeddings

from ragtiller.errors import IndexStoreError, IngestError
from ragtiller.index.chunking import DEFAULT_CHUNKING, ChunkingConfig
from ragtiller.index.embedded import EmbeddedIndex, read_manifest
from ragtiller.index.embedders import embedder_identity
from ragtiller.index.manifest import MANIFEST_FILE
from ragtiller.index.progress import IngestProgress
from ragtiller.index.sources import Source
from ragtiller.index.sync import CLEANUP_MODES, Cleanup
from ragtiller.index.variant_check import variant_rebuild_reason
from ragtiller.index.versions import (
    FaultHook,
    check_writable,
    is_index_directory,
    open_current,
    tidy,
)


def ingest(
    sources: Iterable[Source],
    index_dir: str | os.PathLike[str],
    *,
    embedder: Embeddings,
    cleanup: Cleanup = "full",
    progress: bool = True,
    fault: FaultHook | None = None,
    **options: Any,
) -> EmbeddedIndex:
    """Ingest ``sources`` into ``index_dir``: the one door for a first and every later ingest.

    Into an existing index, only what changed is embedded: chunks are keyed by stable id and
    fingerprinted by text, metadata and embedder, unchanged chunks keep their stored vectors,
    chunks of edited or removed sources are deleted, new ones added. Nothing changed: nothing
    is written. An index built with another embedder or other chunking settings is rebuilt in
    full, and the report says why. ``index.report`` holds the counts ``ragtiller ingest``
    prints.

    Args:
        sources: Files, directories and/or LangChain ``Document``s.
        index_dir: The index directory (created if needed).
        embedder: Any LangChain ``Embeddings``.
        cleanup: ``full`` (default): the index ends up holding exactly ``sources``;
            ``incremental``: documents already indexed but not among ``sources`` stay.
        progress: One progress bar over read, chunk, embed, index and save.
        fault: Passed to :meth:`EmbeddedIndex.save` (crash tests).
        **options: Passed to :meth:`EmbeddedIndex.build` (``chunking``, ``lexical``,
            ``namespace``, ``batch_size``, ``retry``, ``max_file_bytes``).

    Returns:
        The index, with :attr:`~EmbeddedIndex.report`.

    Raises:
        IngestError: Nothing to ingest, a missing path, ``cleanup`` not a mode, an
            ``incremental`` ingest into an index that has to be rebuilt, or a document id
            given by two sources (:mod:`ragtiller.index.doc_ids`).
        IndexStoreError: ``index_dir`` is a non-empty directory that holds no index, or a file
            operation on it failed (a full disk, a read-only file system): the message names
            the path, and a failed save leaves nothing behind.
        EmbeddingError: The embedder kept failing on a batch.
    """
    if cleanup not in CLEANUP_MODES:
        raise IngestError(f"cleanup must be one of {CLEANUP_MODES}, but got {cleanup!r}")
    directory = Path(index_dir)
    check_writable(directory)
    chunking: ChunkingConfig = options.get("chunking", DEFAULT_CHUNKING)
    previous, reason = _previous(directory, embedder, chunking)
    if reason is not None and cleanup == "incremental":
        raise IngestError(
            f"cannot ingest incrementally into {directory}: {reason}; ingest every source "
            "with cleanup 'full' (ragtiller ingest --cleanup full) to rebuild it"
        )
    with IngestProgress(enabled=progress) as bar:
        index = EmbeddedIndex.build(
            sources,
            embedder=embedder,
            progress=bar,
            previous=previous,
            cleanup=cleanup,
            rebuild_reason=reason,
            **options,
        )
        assert index.report is not None
        if index is not previous:
            version = index.save(directory, progress=bar, fault=fault)
            index.report = replace(index.report, version=version.name)
        else:
            tidy(directory)  # free what a killed save left, though nothing is rewritten
    return index


def _previous(
    directory: Path, embedder: Embeddings, chunking: ChunkingConfig
) -> tuple[EmbeddedIndex | None, str | None]:
    """The index already at ``directory`` if this ingest can build on it, else why not."""
    if not directory.is_dir() or not is_index_directory(directory):
        return None, None
    try:
        manifest = open_current(directory, lambda v: read_manifest(v / MANIFEST_FILE))
    except IndexStoreError as e:
        return None, f"the index there could not be read ({e})"
    name, dimension = embedder_identity(embedder)
    built = manifest.embedder
    if (name, dimension) != (built.name, built.dimension):
        return None, (
            f"embedder changed from {built.name!r} (dimension {built.dimension}) to {name!r} "
            f"(dimension {dimension})"
        )
    if manifest.chunking != chunking:
        old, new = manifest.chunking, chunking
        return None, (
            f"chunking changed from chunk_tokens={old.chunk_tokens}, overlap_tokens="
            f"{old.overlap_tokens} to chunk_tokens={new.chunk_tokens}, overlap_tokens="
            f"{new.overlap_tokens}"
        )
    try:
        index = EmbeddedIndex.load(directory, embedder=embedder)
    except IndexStoreError as e:
        return None, f"the index there could not be opened ({e})"
    reason = variant_rebuild_reason(index, embedder)  # stored vectors must match new ones
    return (None, reason) if reason is not None else (index, None)
