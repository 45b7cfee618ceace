"""The ingest door: read, chunk, embed what changed and assemble an index, then save it."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings

from ragtiller.core.filters import TENANT_KEY
from ragtiller.core.retry import RetryPolicy
from ragtiller.errors import IndexStoreError, IngestError
from ragtiller.index.corpus_map import build_corpus_map
from ragtiller.index.dense import NumpyVectorStore
from ragtiller.index.embedded import (
    EmbeddedIndex,
    build_derived,
    read_manifest,
    variant_rebuild_reason,
)
from ragtiller.index.lexical import DEFAULT_LEXICAL, LexicalConfig, LexicalTier, indexed_text
from ragtiller.index.manifest import (
    MANIFEST_FILE,
    VECTOR_DTYPES,
    EmbedderInfo,
    IndexCounts,
    IndexManifest,
    VectorDtype,
)
from ragtiller.index.records import RecordTable, namespace_of
from ragtiller.index.units import DEFAULT_CHUNKING, ChunkingConfig, section_from_record
from ragtiller.index.versions import (
    FaultHook,
    check_writable,
    is_index_directory,
    open_current,
    tidy,
)
from ragtiller.ingest.chunking import ModelWindow, chunk_documents, chunk_metadata, section_metadata
from ragtiller.ingest.progress import IngestProgress
from ragtiller.ingest.sources import (
    DEFAULT_MAX_FILE_BYTES,
    SkippedSource,
    Source,
    check_against_index,
    load_sources,
)
from ragtiller.ingest.store_sync import (
    CLEANUP_MODES,
    ChangeCounts,
    Cleanup,
    SyncRecord,
    embedding_key,
    fingerprint,
    group_id,
    identity_of,
    plan_sync,
)
from ragtiller.models.batch_embedding import DEFAULT_RETRY, EmbeddingStats, Matrix, embed_texts
from ragtiller.models.embedders import embedder_identity, embedder_variant


@dataclass(frozen=True)
class IngestReport:
    """The counts of one ingest (``version``: the one written, None when nothing was saved)."""

    documents: ChangeCounts
    chunks: ChangeCounts
    embedded: int
    cleanup: Cleanup = "full"
    rebuild_reason: str | None = None
    version: str | None = None
    skipped: tuple[SkippedSource, ...] = ()

    @property
    def changed(self) -> bool:
        return self.chunks.changed or self.rebuild_reason is not None

    def summary(self) -> str:
        """One line, as ``ragtiller ingest`` prints it."""
        parts = [f"documents: {self.documents}", f"chunks: {self.chunks}"]
        parts.append(f"embedded {self.embedded} text{'s' if self.embedded != 1 else ''}")
        if self.rebuild_reason:
            parts.append(f"full rebuild: {self.rebuild_reason}")
        if self.version:
            parts.append(f"saved as {self.version}")
        elif not self.changed and self.chunks.unchanged:
            parts.append("index unchanged, not rewritten")
        else:
            parts.append("not saved")
        if self.skipped:
            parts.append(f"{len(self.skipped)} path{'s' if len(self.skipped) != 1 else ''} skipped")
        return "; ".join(parts)


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
    """Ingest ``sources`` into ``index_dir``, embedding only what changed; an index built with
    another embedder or chunking is rebuilt in full. ``options`` go to :func:`build_index`."""
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
    """Read, chunk, embed and index ``sources`` (not saved), reusing the vectors of unchanged
    chunks of ``previous``, or ``previous`` itself (with a new report) when nothing changed."""
    if vector_dtype not in VECTOR_DTYPES:
        raise IngestError(f"vector_dtype must be one of {VECTOR_DTYPES}, but got {vector_dtype!r}")
    bar = progress if isinstance(progress, IngestProgress) else IngestProgress(enabled=progress)
    try:
        documents, skipped = load_sources(
            sources,
            namespace=namespace,
            max_file_bytes=max_file_bytes,
            on_total=lambda n: bar.stage("read", n, unit="file"),
            on_read=bar.advance,
        )
        if previous is not None and cleanup == "incremental":
            check_against_index(documents, previous.parents.metadatas)
        bar.stage("chunk", len(documents), unit="doc")
        sections, chunks = chunk_documents(documents, chunking, ModelWindow.of(embedder))
        bar.advance(len(documents))
        if previous is not None and previous.manifest.chunking != chunking:
            raise IngestError(
                f"the previous index was chunked with {previous.manifest.chunking!r}, this "
                f"ingest uses {chunking!r}; rebuild it in full (no previous index)"
            )
        if not chunks and (previous is None or cleanup == "full"):
            detail = "; ".join(f"{s.path} ({s.reason})" for s in skipped)
            raise IngestError(
                f"nothing to ingest: {len(documents)} document(s) read, none with text; "
                f"{len(skipped)} source(s) skipped"
                + (f": {detail}" if detail else "")
                + "; pass Markdown, reStructuredText, text or BEIR .jsonl files, or Documents"
            )
        name, dimension = embedder_identity(embedder)
        built = None if previous is None else previous.manifest.embedder
        if built is not None and (name, dimension) != (built.name, built.dimension):
            raise IngestError(
                f"the previous index was embedded with {built.name!r}, "
                f"this ingest uses {name!r}; rebuild it in full (no previous index)"
            )
        identity = identity_of(name, dimension)
        metadatas = [chunk_metadata(c, chunking.header) for c in chunks]
        parent_md = {s.id: section_metadata(s) for s in sections}
        current = [
            _sync_record(identity, c.id, c.text, md, parent_md[md["parent_id"]])
            for c, md in zip(chunks, metadatas, strict=True)
        ]
        stored: list[SyncRecord] = []  # the previous index's chunks, same embedder (checked)
        if previous is not None:
            old_parents = dict(zip(previous.parents.ids, previous.parents.metadatas, strict=True))
            stored = [
                _sync_record(identity, i, t, md, old_parents.get(str(md.get("parent_id")), {}))
                for i, t, md in previous.store.records.items()
            ]
        plan = plan_sync(current, stored, cleanup)
        stats = EmbeddingStats()
        report = IngestReport(
            plan.documents, plan.chunks, 0, cleanup, rebuild_reason, skipped=tuple(skipped)
        )
        if (
            previous is not None
            and not plan.changed
            and previous.manifest.lexical == lexical
            and previous.manifest.vector_dtype == vector_dtype
        ):
            previous.report = report
            return previous
        indexed = [indexed_text(c.text, md) for c, md in zip(chunks, metadatas, strict=True)]
        vectors = _vectors(embedder, indexed, previous, identity, stats, bar, batch_size, retry)
        ids, texts, all_sections = [c.id for c in chunks], [c.text for c in chunks], sections
        if previous is not None and plan.kept_groups:  # what incremental cleanup leaves alone

            def kept(md: dict[str, Any], default: str | None) -> bool:
                return (
                    group_id(namespace_of(md), str(md.get("doc_id", default))) in plan.kept_groups
                )

            old, old_sections = previous.store.records, previous.parents
            rows = [r for r, md in enumerate(old.metadatas) if kept(md, old.ids[r])]
            vectors = np.concatenate([np.asarray(previous.store.vectors[rows]), vectors])
            ids = [old.ids[r] for r in rows] + ids
            texts = [old.texts[r] for r in rows] + texts
            metadatas = [old.metadatas[r] for r in rows] + metadatas
            indexed = [indexed_text(old.texts[r], old.metadatas[r]) for r in rows] + indexed
            all_sections = [
                section_from_record(old_sections.ids[r], old_sections.texts[r], md)
                for r, md in enumerate(old_sections.metadatas)
                if kept(md, None)
            ] + sections
        bar.stage("index", len(ids), unit="chunk")
        store = NumpyVectorStore.from_vectors(
            texts, vectors, embedder, metadatas, ids=ids, dtype=vector_dtype
        )
        parents = RecordTable(
            [s.id for s in all_sections],
            [s.text for s in all_sections],
            [section_metadata(s) for s in all_sections],
        )
        lexical_tier = LexicalTier.build(store.records, indexed, lexical)
        derived = build_derived(store, parents)
        bar.advance(len(ids))
        # pre-split Documents sharing an id are passages of one document: count documents once
        keys = {(s.document.namespace, s.document.doc_id) for s in all_sections}
        manifest = IndexManifest(
            embedder=EmbedderInfo(name=name, dimension=dimension),
            chunking=chunking,
            lexical=lexical,
            counts=IndexCounts(
                documents=len(keys | {(d.namespace, d.doc_id) for d in documents}),
                sections=len(all_sections),
                chunks=len(ids),
            ),
            namespaces=store.records.namespaces,
            tenanted=any(TENANT_KEY in metadata for metadata in metadatas),
            embedder_variant=embedder_variant(embedder),
            vector_dtype=vector_dtype,
        )
    finally:
        if bar is not progress:
            bar.close()
    index = EmbeddedIndex(
        store=store,
        parents=parents,
        lexical=lexical_tier,
        manifest=manifest,
        corpus_map=build_corpus_map(all_sections),
        stats=stats,
        derived=derived,
    )
    index.report = replace(report, embedded=stats.chunks_embedded)
    return index


def _vectors(
    embedder: Embeddings,
    indexed: list[str],
    previous: EmbeddedIndex | None,
    identity: str,
    stats: EmbeddingStats,
    bar: IngestProgress,
    batch_size: int,
    retry: RetryPolicy,
) -> Matrix:
    """One vector per text: the stored one for the same text and embedder, else embedded once."""
    stored: dict[str, int] = {}
    if previous is not None:
        old = previous.store.records
        for row, (text, md) in enumerate(zip(old.texts, old.metadatas, strict=True)):
            stored.setdefault(embedding_key(identity, indexed_text(text, md)), row)
    keys = [embedding_key(identity, text) for text in indexed]
    missing = {key: text for key, text in zip(keys, indexed, strict=True) if key not in stored}
    bar.stage("embed", len(missing), unit="text")
    if not missing:  # every text is stored
        assert previous is not None
        return np.asarray(previous.store.vectors[[stored[key] for key in keys]], dtype=np.float32)
    fresh = embed_texts(
        embedder,
        list(missing.values()),
        batch_size=batch_size,
        retry=retry,
        stats=stats,
        progress=False,
        on_batch=bar.advance,
    )
    rows = {key: i for i, key in enumerate(missing)}
    out = np.empty((len(keys), fresh.shape[1]), dtype=np.float32)
    for position, key in enumerate(keys):
        if key in rows:
            out[position] = fresh[rows[key]]
        else:
            assert previous is not None
            out[position] = previous.store.vectors[stored[key]]
    return out


def _sync_record(
    identity: str, id_: str, text: str, metadata: dict[str, Any], parent: dict[str, Any]
) -> SyncRecord:
    # its parent's metadata (offsets in the document) counts too
    group = group_id(namespace_of(metadata), str(metadata.get("doc_id", id_)))
    payload = {"chunk": metadata, "parent": parent}
    return SyncRecord(id_, group, fingerprint(identity, text, payload))
