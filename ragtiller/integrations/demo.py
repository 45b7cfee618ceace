"""The demo over the standard library's own documentation (on every Python install: no
download), its index cached per corpus, Python version and embedder."""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Callable
from pathlib import Path

from langchain_core.embeddings import Embeddings
from platformdirs import user_cache_dir

from ragtiller.core.providers import model_label
from ragtiller.errors import IndexStoreError, RagtillerError
from ragtiller.index import ChunkingConfig, EmbeddedIndex
from ragtiller.ingest import build_index, stdlib_documents
from ragtiller.models import HashingEmbedder, embedder_variant, local_embedder

DEMO_QUESTIONS: tuple[str, ...] = (  # an identifier, a fact, a broad question, a greeting
    "StopAsyncIteration",
    "which exception is raised when a dictionary key is missing",
    "how do I run several coroutines concurrently?",
    "hello!",
)
DEMO_CHUNKING = ChunkingConfig(chunk_tokens=160, overlap_tokens=32)


def demo_embedder(kind: str) -> Embeddings:
    """``minilm`` (the bundled all-MiniLM-L6-v2) or ``hashing`` (fast, lexical, for a smoke run)."""
    if kind == "minilm":
        return local_embedder()
    if kind == "hashing":
        return HashingEmbedder()
    raise RagtillerError(f"unknown embedder {kind!r}; valid: minilm, hashing")


def demo_index(
    embedder: Embeddings,
    *,
    cache_dir: Path | None = None,
    rebuild: bool = False,
    log: Callable[[str], None] = print,
) -> EmbeddedIndex:
    docs = stdlib_documents()
    fingerprint = hashlib.sha256()
    for doc in docs:
        fingerprint.update(doc.metadata["source"].encode())
        fingerprint.update(hashlib.sha256(doc.page_content.encode()).digest())
    identity = f"{model_label(embedder)}|{embedder_variant(embedder)}"
    fingerprint.update(f"{sys.version_info[:2]}|{identity}|{DEMO_CHUNKING}".encode())
    root = cache_dir or Path(user_cache_dir("ragtiller"))
    where = root / f"demo-{fingerprint.hexdigest()[:16]}"
    if where.is_dir() and not rebuild:
        try:
            cached = EmbeddedIndex.load(where, embedder=embedder)
        except IndexStoreError as e:  # a first build that was interrupted, or a damaged cache
            log(f"the cached demo index is unusable ({e}); rebuilding it")
        else:
            log(f"using the cached demo index at {where}")
            return cached
    log(f"building the demo index from {len(docs)} stdlib documents (cached at {where}) ...")
    index = build_index(docs, embedder=embedder, chunking=DEMO_CHUNKING, progress=True)
    index.save(where)
    counts = index.manifest.counts
    log(
        f"indexed {counts.chunks} chunks in {counts.sections} sections of {counts.documents} documents"
    )
    return index
