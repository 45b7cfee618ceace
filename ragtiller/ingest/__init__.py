"""Ingest: read sources, cut them into sections and passages, embed what changed, and write the
embedded index (or another LangChain vector store, or a record manager's store)."""

from ragtiller.ingest.chunking import Chunk, chunk_documents
from ragtiller.ingest.pipeline import IngestReport, build_index, ingest
from ragtiller.ingest.progress import IngestProgress
from ragtiller.ingest.record_manager import SQLiteRecordManager
from ragtiller.ingest.sources import SkippedSource, load_sources
from ragtiller.ingest.stdlib_corpus import stdlib_documents
from ragtiller.ingest.store_sync import ChangeCounts, Cleanup, SyncResult, sync_vector_store
from ragtiller.ingest.to_store import chunk_sources, ingest_to_store

__all__ = (
    "ChangeCounts",
    "Chunk",
    "Cleanup",
    "IngestProgress",
    "IngestReport",
    "SQLiteRecordManager",
    "SkippedSource",
    "SyncResult",
    "build_index",
    "chunk_documents",
    "chunk_sources",
    "ingest",
    "ingest_to_store",
    "load_sources",
    "stdlib_documents",
    "sync_vector_store",
)
