"""The ingest door: build a new index, or bring an existing one up to date, and save it."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

from langchain_core.embeddings import Embeddings

from ragtiller.core.retry import RetryPolicy
from ragtiller.errors import IndexStoreError, IngestError
from ragtiller.index.embedded import EmbeddedIndex, read_manifest, variant_rebuild_reason
from ragtiller.index.lexical import DEFAULT_LEXICAL, LexicalConfig
from ragtiller.index.manifest import MANIFEST_FILE, VECTOR_DTYPES, VectorDtype
from ragtiller.index.units import DEFAULT_CHUNKING, ChunkingConfig
from ragtiller.index.versions import (
    FaultHook,
    check_writable,
    is_index_directory,
    open_current,
    tidy,
)
from ragtiller.ingest.builder import IndexBuilder
from ragtiller.ingest.progress import IngestProgress
from ragtiller.ingest.sources import DEFAULT_MAX_FILE_BYTES, Source
from ragtiller.ingest.store_sync import CLEANUP_MODES, Cleanup
from ragtiller.models.batch_embedding import DEFAULT_RETRY
from ragtiller.models.embedders import embedder_identity


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
        **options: Passed to :meth:`build_index` (``chunking``, ``lexical``,
            ``namespace``, ``batch_size``, ``retry``, ``max_file_bytes``, ``vector_dtype``).

    Returns:
        The index, with :attr:`~EmbeddedIndex.report`.

    Raises:
        IngestError: Nothing to ingest, a missing path, ``cleanup`` not a mode, an
            ``incremental`` ingest into an index that has to be rebuilt, or a document id
            given by two sources (:mod:`ragtiller.ingest.doc_ids`).
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
    vector_dtype: VectorDtype = options.get("vector_dtype", "float32")
    previous, reason = _previous(directory, embedder, chunking, vector_dtype)
    if reason is not None and cleanup == "incremental":
        raise IngestError(
            f"cannot ingest incrementally into {directory}: {reason}; ingest every source "
            "with cleanup 'full' (ragtiller ingest --cleanup full) to rebuild it"
        )
    with IngestProgress(enabled=progress) as bar:
        index = build_index(
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
    directory: Path, embedder: Embeddings, chunking: ChunkingConfig, vector_dtype: VectorDtype
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
        changed = ", ".join(f"{key}={value!r}" for key, value in old if value != getattr(new, key))
        now = ", ".join(f"{key}={value!r}" for key, value in new if value != getattr(old, key))
        return None, f"chunking changed from {changed} to {now}"
    if (manifest.vector_dtype, vector_dtype) == ("float16", "float32"):
        # its vectors were rounded to float16: reusing them would not give a float32 index
        return None, "vector dtype changed from float16 to float32 (the stored vectors are rounded)"
    try:
        index = EmbeddedIndex.load(directory, embedder=embedder)
    except IndexStoreError as e:
        return None, f"the index there could not be opened ({e})"
    reason = variant_rebuild_reason(index, embedder)  # stored vectors must match new ones
    return (None, reason) if reason is not None else (index, None)


def build_index(
    sources: Iterable[Source],
    *,
    embedder: Embeddings,
    chunking: ChunkingConfig = DEFAULT_CHUNKING,
    lexical: LexicalConfig = DEFAULT_LEXICAL,
    namespace: str = "default",
    progress: bool | IngestProgress = True,
    batch_size: int = 64,
    retry: RetryPolicy = DEFAULT_RETRY,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
    previous: EmbeddedIndex | None = None,
    cleanup: Cleanup = "full",
    rebuild_reason: str | None = None,
    vector_dtype: VectorDtype = "float32",
) -> EmbeddedIndex:
    """Read, chunk, embed and index ``sources``, reusing what ``previous`` already holds.

    Chunks of ``previous`` whose text, metadata and embedder are unchanged keep their
    vectors; only new and edited texts are embedded. With ``previous`` unchanged in every
    respect, ``previous`` itself is returned (with a :attr:`report`).

    Args:
        sources: Files, directories and/or LangChain ``Document``s.
        embedder: Any LangChain ``Embeddings``; its name and dimension go in the manifest.
        chunking: Child chunk size and overlap (must equal ``previous``'s).
        lexical: BM25 parameters.
        namespace: Namespace of documents whose metadata names none.
        progress: Show one progress bar over the whole build (or draw on this one).
        batch_size: Texts per embedding call.
        retry: Attempts and backoff per embedding call.
        max_file_bytes: Files larger than this are skipped, in bytes.
        previous: The index being brought up to date, built with the same embedder and
            chunking.
        cleanup: ``full``: the result holds exactly ``sources``; ``incremental``: documents
            of ``previous`` not among ``sources`` are kept.
        rebuild_reason: Why ``previous`` is None although an index existed (for the report).
        vector_dtype: How the index stores its vectors: ``float32`` (default) or ``float16``
            (half the memory; scores are still computed in float32). Recorded in the
            manifest; a float16 index re-ingested as float32 is embedded again in full.

    Returns:
        The index, not yet saved.

    Raises:
        IngestError: Nothing readable to ingest (the message lists what was skipped), a
            path does not exist, ``previous`` was built with another embedder or
            chunking, or ``vector_dtype`` is not one of :data:`VECTOR_DTYPES`.
        EmbeddingError: The embedder kept failing on a batch.
    """
    if vector_dtype not in VECTOR_DTYPES:
        raise IngestError(f"vector_dtype must be one of {VECTOR_DTYPES}, but got {vector_dtype!r}")
    bar = progress if isinstance(progress, IngestProgress) else IngestProgress(enabled=progress)
    try:
        builder = IndexBuilder(embedder, chunking, lexical, bar, batch_size, retry, vector_dtype)
        parts = builder.build(
            sources,
            namespace=namespace,
            max_file_bytes=max_file_bytes,
            previous=previous,
            cleanup=cleanup,
            rebuild_reason=rebuild_reason,
        )
    finally:
        if bar is not progress:
            bar.close()
    if parts.unchanged:
        assert previous is not None
        previous.report = parts.report
        return previous
    assert parts.store and parts.parents and parts.lexical and parts.manifest and parts.derived
    index = EmbeddedIndex(
        store=parts.store,
        parents=parts.parents,
        lexical=parts.lexical,
        manifest=parts.manifest,
        corpus_map=parts.corpus_map,
        stats=parts.stats,
        derived=parts.derived,
    )
    index.report = parts.report
    return index
