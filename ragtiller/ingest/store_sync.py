"""Incremental sync, not LangChain's ``index()``: a record key is the chunk's stable id plus a
fingerprint, so an edited chunk is upserted over itself and keeps the id fusion relies on; and
writes and deletes go to one namespace at a time, as Pinecone needs."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from langchain_core.documents import Document
from langchain_core.indexing import RecordManager
from langchain_core.vectorstores import VectorStore

from ragtiller.core.providers import run_bounded
from ragtiller.index.records import namespace_of
from ragtiller.ingest.progress import IngestProgress

Cleanup = Literal["incremental", "full"]
CLEANUP_MODES: tuple[Cleanup, ...] = ("incremental", "full")


@dataclass(frozen=True)
class ChangeCounts:
    """How many items an ingest added, updated, left unchanged and deleted."""

    added: int = 0
    updated: int = 0
    unchanged: int = 0
    deleted: int = 0

    def __str__(self) -> str:
        return (
            f"{self.added} added, {self.updated} updated, {self.unchanged} unchanged, "
            f"{self.deleted} deleted"
        )

    @property
    def changed(self) -> bool:
        return bool(self.added or self.updated or self.deleted)


@dataclass(frozen=True)
class SyncRecord:
    """A chunk's stable id, its source document (the unit of cleanup) and its fingerprint."""

    id: str
    group: str
    fingerprint: str

    @property
    def key(self) -> str:
        return json.dumps([self.id, self.fingerprint, self.group], ensure_ascii=False)

    @classmethod
    def from_key(cls, key: str) -> SyncRecord:
        try:
            id_, fingerprint, group = json.loads(key)
        except (ValueError, TypeError) as e:
            raise ValueError(f"record key {key!r} was not written by ragtiller's sync") from e
        return cls(str(id_), str(group), str(fingerprint))


@dataclass(frozen=True)
class SyncPlan:
    """Positions to write, ids to delete, stale keys to forget, groups left alone."""

    upsert: tuple[int, ...]
    delete: tuple[str, ...]
    stale: tuple[SyncRecord, ...]
    kept_groups: frozenset[str]
    documents: ChangeCounts
    chunks: ChangeCounts

    @property
    def changed(self) -> bool:
        return bool(self.upsert or self.delete)


@dataclass(frozen=True)
class SyncResult:
    """What :func:`sync_vector_store` did (per namespace: ``None`` when not namespaced)."""

    documents: ChangeCounts
    chunks: ChangeCounts
    upserted_by_namespace: dict[str | None, int] = field(default_factory=dict)
    deleted_by_namespace: dict[str | None, int] = field(default_factory=dict)


def group_id(namespace: str, doc_id: str) -> str:
    return json.dumps([namespace, doc_id], ensure_ascii=False)


def fingerprint(identity: str, text: str, metadata: Mapping[str, Any]) -> str:
    payload = json.dumps([identity, text, metadata], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def embedding_key(identity: str, text: str) -> str:
    return hashlib.sha256(f"{identity}\x1f{text}".encode()).hexdigest()


def identity_of(name: str, dimension: int) -> str:
    return f"{name}@{dimension}"


def plan_sync(
    current: Sequence[SyncRecord], previous: Iterable[SyncRecord], cleanup: Cleanup
) -> SyncPlan:
    """The plan that makes an index holding ``previous`` hold exactly ``current`` (and, for
    ``incremental``, other groups as they were)."""
    if cleanup not in CLEANUP_MODES:
        raise ValueError(f"cleanup must be one of {CLEANUP_MODES}, but got {cleanup!r}")
    seen_groups = {r.group for r in current}
    wanted = {r.id: r.fingerprint for r in current}
    old_by_id: dict[str, SyncRecord] = {}
    doubled: list[SyncRecord] = []  # a second key for one id: a sync stopped before forgetting
    kept_groups: set[str] = set()
    for record in previous:
        if cleanup == "full" or record.group in seen_groups:
            kept = old_by_id.get(record.id)
            if kept is not None and kept.fingerprint == wanted.get(record.id):
                doubled.append(record)
                continue
            if kept is not None:
                doubled.append(kept)
            old_by_id[record.id] = record
        else:
            kept_groups.add(record.group)
    upsert: list[int] = []
    stale: list[SyncRecord] = []  # the previous records of updated chunks
    changed_groups: set[str] = set()
    for position, record in enumerate(current):
        old = old_by_id.get(record.id)
        if old is None or old.fingerprint != record.fingerprint:
            upsert.append(position)
            changed_groups.add(record.group)
            if old is not None:
                stale.append(old)
    updated = len(stale)
    gone = [r for r in old_by_id.values() if r.id not in wanted]
    changed_groups.update(r.group for r in gone)
    old_groups = {r.group for r in old_by_id.values()}
    documents = ChangeCounts(
        added=len(seen_groups - old_groups),
        updated=len(seen_groups & old_groups & changed_groups),
        unchanged=len((seen_groups & old_groups) - changed_groups),
        deleted=len(old_groups - seen_groups),
    )
    return SyncPlan(
        tuple(upsert),
        tuple(r.id for r in gone),
        (*stale, *gone, *doubled),
        frozenset(kept_groups),
        documents,
        ChangeCounts(len(upsert) - updated, updated, len(current) - len(upsert), len(gone)),
    )


def sync_vector_store(
    documents: Sequence[Document],
    *,
    record_manager: RecordManager,
    vector_store: VectorStore,
    embedder_identity: str,
    cleanup: Cleanup = "incremental",
    namespaced: bool = False,
    batch_size: int = 100,
    write_kwargs: Mapping[str, Any] | None = None,
    concurrency: int = 1,
    progress: IngestProgress | None = None,
) -> SyncResult:
    """Bring any LangChain ``VectorStore`` up to date with ``documents``; each batch is written
    before its records, so a sync killed midway is resumed by the next."""
    if batch_size < 1 or concurrency < 1:
        raise ValueError(
            f"batch_size and concurrency must be > 0, but got {batch_size} and {concurrency}"
        )
    records = [_record(doc, embedder_identity) for doc in documents]
    if len({r.id for r in records}) != len(records):
        raise ValueError("documents must have unique ids")
    record_manager.create_schema()
    groups = sorted({r.group for r in records})
    listed = (
        record_manager.list_keys()
        if cleanup == "full"
        else (record_manager.list_keys(group_ids=groups) if groups else [])
    )
    previous = [SyncRecord.from_key(k) for k in listed]
    plan = plan_sync(records, previous, cleanup)
    namespace_by_id: dict[str, str | None] = {r.id: None for r in [*records, *plan.stale]}
    if namespaced:  # a stale record's own namespace, where it and a current one share an id
        namespace_by_id.update(
            {r.id: namespace_of(doc.metadata) for r, doc in zip(records, documents, strict=True)}
        )
        namespace_by_id.update({r.id: str(json.loads(r.group)[0]) for r in plan.stale})
    writes: dict[str | None, list[int]] = {}
    for position in plan.upsert:
        writes.setdefault(namespace_by_id[records[position].id], []).append(position)
    batches = [
        (namespace, positions[first : first + batch_size])
        for namespace, positions in writes.items()
        for first in range(0, len(positions), batch_size)
    ]
    if progress is not None:
        progress.stage("write", len(plan.upsert), unit="chunk")
    counted = threading.Lock()

    def write(job: tuple[str | None, list[int]]) -> None:
        namespace, batch = job
        kwargs = dict(write_kwargs or {})
        if namespace is not None:
            kwargs["namespace"] = namespace
        vector_store.add_documents(
            [documents[p] for p in batch], ids=[records[p].id for p in batch], **kwargs
        )
        record_manager.update(
            [records[p].key for p in batch], group_ids=[records[p].group for p in batch]
        )
        if progress is not None:
            with counted:
                progress.advance(len(batch))

    run_bounded(write, batches, concurrency, "ragtiller-sync")
    deletes: dict[str | None, list[str]] = {}
    for id_ in plan.delete:
        deletes.setdefault(namespace_by_id[id_], []).append(id_)
    for namespace, ids in deletes.items():
        where = {} if namespace is None else {"namespace": namespace}
        for first in range(0, len(ids), batch_size):
            vector_store.delete(ids[first : first + batch_size], **where)
    if plan.stale:
        record_manager.delete_keys([r.key for r in plan.stale])
    upserted = {namespace: len(positions) for namespace, positions in writes.items()}
    deleted = {namespace: len(ids) for namespace, ids in deletes.items()}
    return SyncResult(plan.documents, plan.chunks, upserted, deleted)


def _record(doc: Document, identity: str) -> SyncRecord:
    if not doc.id:
        raise ValueError(
            f"every document needs an id; this one has none: {doc.page_content[:60]!r}"
        )
    doc_id = doc.metadata.get("doc_id")
    if doc_id is None:
        raise ValueError(f"document {doc.id!r} has no doc_id metadata (its source document)")
    group = group_id(namespace_of(doc.metadata), str(doc_id))
    return SyncRecord(doc.id, group, fingerprint(identity, doc.page_content, doc.metadata))
