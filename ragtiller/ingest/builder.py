"""Assemble an embedded index from sources, reusing the vectors a previous index already holds."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from langchain_core.embeddings import Embeddings

from ragtiller.core.filters import TENANT_KEY
from ragtiller.core.retry import RetryPolicy
from ragtiller.errors import IngestError
from ragtiller.index.corpus_map import build_corpus_map
from ragtiller.index.dense import NumpyVectorStore
from ragtiller.index.embedded import Derived, build_derived
from ragtiller.index.lexical import HEADER_KEY, LexicalConfig, LexicalTier, indexed_text
from ragtiller.index.manifest import EmbedderInfo, IndexCounts, IndexManifest, VectorDtype
from ragtiller.index.records import RecordTable, namespace_of
from ragtiller.index.units import ChunkHeader, ChunkingConfig, Section, section_from_record
from ragtiller.ingest.chunking import Chunk, ModelWindow, chunk_documents, chunk_header
from ragtiller.ingest.doc_ids import check_against_index
from ragtiller.ingest.progress import IngestProgress
from ragtiller.ingest.report import IngestReport
from ragtiller.ingest.sources import SkippedSource, Source, load_sources
from ragtiller.ingest.store_sync import (
    Cleanup,
    SyncPlan,
    SyncRecord,
    embedding_key,
    fingerprint,
    group_id,
    identity_of,
    plan_sync,
)
from ragtiller.models.batch_embedding import EmbeddingStats, Matrix, embed_texts
from ragtiller.models.embedders import embedder_identity, embedder_variant

if TYPE_CHECKING:
    from ragtiller.index.embedded import EmbeddedIndex


@dataclass(frozen=True)
class BuiltParts:
    """What an index is made of; ``unchanged`` means the previous index can be reused as is."""

    store: NumpyVectorStore | None
    parents: RecordTable | None
    lexical: LexicalTier | None
    manifest: IndexManifest | None
    corpus_map: str
    stats: EmbeddingStats
    report: IngestReport
    skipped: tuple[SkippedSource, ...]
    derived: Derived | None = None
    """The section BM25, parent rows and HNSW graph, built here so that opening is cheap."""

    @property
    def unchanged(self) -> bool:
        """True when nothing was assembled because the previous index is up to date."""
        return self.store is None


@dataclass(frozen=True)
class _Rows:
    """Row-aligned ids, texts, metadatas and indexed (embedded) texts."""

    ids: list[str]
    texts: list[str]
    metadatas: list[dict[str, Any]]
    indexed: list[str]


class IndexBuilder:
    """Reads, chunks, plans against a previous index, embeds what is new, assembles.

    Args:
        embedder: Embeds new texts and names the index's embedder.
        chunking: Child chunk size and overlap.
        lexical: BM25 parameters.
        bar: The ingest's progress bar.
        batch_size: Texts per embedding call.
        retry: Attempts and backoff per embedding call.
        vector_dtype: How the index stores its vectors.
    """

    def __init__(
        self,
        embedder: Embeddings,
        chunking: ChunkingConfig,
        lexical: LexicalConfig,
        bar: IngestProgress,
        batch_size: int,
        retry: RetryPolicy,
        vector_dtype: VectorDtype = "float32",
    ) -> None:
        self.embedder = embedder
        self.vector_dtype = vector_dtype
        self.chunking = chunking
        self.lexical = lexical
        self.bar = bar
        self.batch_size = batch_size
        self.retry = retry

    def build(
        self,
        sources: Iterable[Source],
        *,
        namespace: str,
        max_file_bytes: int,
        previous: EmbeddedIndex | None,
        cleanup: Cleanup,
        rebuild_reason: str | None,
    ) -> BuiltParts:
        """Everything :meth:`EmbeddedIndex.build` documents."""
        bar = self.bar
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
        window = ModelWindow.of(self.embedder)
        sections, chunks = chunk_documents(documents, self.chunking, window)
        bar.advance(len(documents))
        if previous is not None and previous.manifest.chunking != self.chunking:
            raise IngestError(
                f"the previous index was chunked with {previous.manifest.chunking!r}, this "
                f"ingest uses {self.chunking!r}; rebuild it in full (no previous index)"
            )
        if not chunks and (previous is None or cleanup == "full"):
            detail = "; ".join(f"{s.path} ({s.reason})" for s in skipped)
            raise IngestError(
                f"nothing to ingest: {len(documents)} document(s) read, none with text; "
                f"{len(skipped)} source(s) skipped"
                + (f": {detail}" if detail else "")
                + "; pass Markdown, reStructuredText, text or BEIR .jsonl files, or Documents"
            )
        name, dimension = embedder_identity(self.embedder)
        if previous is not None and (name, dimension) != (
            previous.manifest.embedder.name,
            previous.manifest.embedder.dimension,
        ):
            raise IngestError(
                f"the previous index was embedded with {previous.manifest.embedder.name!r}, "
                f"this ingest uses {name!r}; rebuild it in full (no previous index)"
            )
        identity = identity_of(name, dimension)
        new = _rows(chunks, self.chunking.header)
        parent_md = {s.id: _section_metadata(s) for s in sections}
        current = [
            chunk_sync_record(identity, i, t, md, parent_md[md["parent_id"]])
            for i, t, md in zip(new.ids, new.texts, new.metadatas, strict=True)
        ]
        plan = plan_sync(current, index_sync_records(previous) if previous else [], cleanup)
        stats = EmbeddingStats()
        if (
            previous is not None
            and not plan.changed
            and previous.manifest.lexical == self.lexical
            and previous.manifest.vector_dtype == self.vector_dtype
        ):
            report = self._report(plan, 0, cleanup, rebuild_reason, skipped)
            return BuiltParts(None, None, None, None, "", stats, report, tuple(skipped))
        kept, kept_rows, kept_sections = _kept(previous, plan)
        vectors = self._vectors(new, previous, identity, stats)
        if kept_rows:
            assert previous is not None
            vectors = np.concatenate([np.asarray(previous.store.vectors[kept_rows]), vectors])
        rows = _Rows(
            kept.ids + new.ids,
            kept.texts + new.texts,
            kept.metadatas + new.metadatas,
            kept.indexed + new.indexed,
        )
        bar.stage("index", len(rows.ids), unit="chunk")
        store = NumpyVectorStore.from_vectors(
            rows.texts,
            vectors,
            self.embedder,
            rows.metadatas,
            ids=rows.ids,
            dtype=self.vector_dtype,
        )
        all_sections = kept_sections + sections
        parents = RecordTable(
            [s.id for s in all_sections],
            [s.text for s in all_sections],
            [_section_metadata(s) for s in all_sections],
        )
        lexical_tier = LexicalTier.build(store.records, rows.indexed, self.lexical)
        derived = build_derived(store, parents)
        bar.advance(len(rows.ids))
        # pre-split Documents sharing an id are passages of one document: count documents once
        keys = {(s.document.namespace, s.document.doc_id) for s in all_sections}
        manifest = IndexManifest(
            embedder=EmbedderInfo(name=name, dimension=dimension),
            chunking=self.chunking,
            lexical=self.lexical,
            counts=IndexCounts(
                documents=len(keys | {(d.namespace, d.doc_id) for d in documents}),
                sections=len(all_sections),
                chunks=len(rows.ids),
            ),
            namespaces=store.records.namespaces,
            tenanted=any(TENANT_KEY in metadata for metadata in rows.metadatas),
            embedder_variant=embedder_variant(self.embedder),
            vector_dtype=self.vector_dtype,
        )
        report = self._report(plan, stats.chunks_embedded, cleanup, rebuild_reason, skipped)
        return BuiltParts(
            store,
            parents,
            lexical_tier,
            manifest,
            build_corpus_map(all_sections),
            stats,
            report,
            tuple(skipped),
            derived,
        )

    def _vectors(
        self,
        new: _Rows,
        previous: EmbeddedIndex | None,
        identity: str,
        stats: EmbeddingStats,
    ) -> Matrix:
        """One vector per new row: the stored one when text and embedder match, else embedded.

        Texts repeated within this ingest are embedded once.
        """
        stored: dict[str, int] = {}
        if previous is not None:
            old = previous.store.records
            for row, (text, md) in enumerate(zip(old.texts, old.metadatas, strict=True)):
                stored.setdefault(embedding_key(identity, indexed_text(text, md)), row)
        keys = [embedding_key(identity, text) for text in new.indexed]
        missing: dict[str, str] = {}
        for key, text in zip(keys, new.indexed, strict=True):
            if key not in stored:
                missing.setdefault(key, text)
        self.bar.stage("embed", len(missing), unit="text")
        fresh: Matrix | None = None
        if missing:
            fresh = embed_texts(
                self.embedder,
                list(missing.values()),
                batch_size=self.batch_size,
                retry=self.retry,
                stats=stats,
                progress=False,
                on_batch=self.bar.advance,
            )
        fresh_row = {key: i for i, key in enumerate(missing)}
        dimension = fresh.shape[1] if fresh is not None else _dimension(previous)
        out = np.empty((len(keys), dimension), dtype=np.float32)
        for position, key in enumerate(keys):
            if key in fresh_row:
                assert fresh is not None
                out[position] = fresh[fresh_row[key]]
            else:
                assert previous is not None
                out[position] = previous.store.vectors[stored[key]]
        return out

    def _report(
        self,
        plan: SyncPlan,
        embedded: int,
        cleanup: Cleanup,
        rebuild_reason: str | None,
        skipped: Sequence[SkippedSource],
    ) -> IngestReport:
        return IngestReport(
            documents=plan.documents,
            chunks=plan.chunks,
            embedded=embedded,
            cleanup=cleanup,
            rebuild_reason=rebuild_reason,
            skipped=tuple(skipped),
        )


def chunk_sync_record(
    identity: str,
    id_: str,
    text: str,
    metadata: dict[str, Any],
    parent_metadata: dict[str, Any],
) -> SyncRecord:
    """A chunk as the sync sees it; its parent's metadata (offsets in the document) counts."""
    group = group_id(namespace_of(metadata), str(metadata.get("doc_id", id_)))
    payload = {"chunk": metadata, "parent": parent_metadata}
    return SyncRecord(id_, group, fingerprint(identity, text, payload))


def _rows(chunks: Sequence[Chunk], header: ChunkHeader) -> _Rows:
    metadatas = [_chunk_metadata(c, header) for c in chunks]
    return _Rows(
        [c.id for c in chunks],
        [c.text for c in chunks],
        metadatas,
        [indexed_text(c.text, md) for c, md in zip(chunks, metadatas, strict=True)],
    )


def _kept(previous: EmbeddedIndex | None, plan: SyncPlan) -> tuple[_Rows, list[int], list[Section]]:
    """Chunks (and their row numbers) and sections of ``previous`` that incremental cleanup
    leaves alone."""
    if previous is None or not plan.kept_groups:
        return _Rows([], [], [], []), [], []
    records = previous.store.records
    rows = [
        r
        for r, md in enumerate(records.metadatas)
        if group_id(namespace_of(md), str(md.get("doc_id", records.ids[r]))) in plan.kept_groups
    ]
    kept = _Rows(
        [records.ids[r] for r in rows],
        [records.texts[r] for r in rows],
        [records.metadatas[r] for r in rows],
        [indexed_text(records.texts[r], records.metadatas[r]) for r in rows],
    )
    parents = previous.parents
    sections = [
        section_from_record(parents.ids[r], parents.texts[r], parents.metadatas[r])
        for r, md in enumerate(parents.metadatas)
        if group_id(namespace_of(md), str(md.get("doc_id"))) in plan.kept_groups
    ]
    return kept, rows, sections


def _dimension(previous: EmbeddedIndex | None) -> int:
    if previous is None:
        raise AssertionError("no new texts and no previous index")  # pragma: no cover
    return previous.manifest.embedder.dimension


def _section_metadata(section: Section) -> dict[str, Any]:
    doc = section.document
    return {
        **doc.metadata,
        "doc_id": doc.doc_id,
        "source": doc.source,
        "namespace": doc.namespace,
        "title": doc.title,
        "section_path": list(section.path),
        "start": section.start,
        "end": section.end,
    }


def _chunk_metadata(chunk: Chunk, header: ChunkHeader) -> dict[str, Any]:
    metadata = {
        **_section_metadata(chunk.section),
        "parent_id": chunk.section.id,
        "start": chunk.start,
        "end": chunk.end,
    }
    text = chunk_header(chunk, header)
    if text and text != chunk.section.document.title:  # a title alone is read from "title"
        metadata[HEADER_KEY] = text
    return metadata


def index_sync_records(index: EmbeddedIndex) -> list[SyncRecord]:
    """The chunk table as sync records (id, source document, fingerprint)."""
    info = index.manifest.embedder
    identity = identity_of(info.name, info.dimension)
    records = index.store.records
    return [
        chunk_sync_record(identity, id_, text, md, _parent_metadata(index, md))
        for id_, text, md in records.items()
    ]


def _parent_metadata(index: EmbeddedIndex, chunk_metadata: dict[str, Any]) -> dict[str, Any]:
    row = index.parents.row(str(chunk_metadata.get("parent_id")))
    return index.parents.metadatas[row] if row is not None else {}
