"""``ragtiller ingest``: into an index directory, Pinecone, or any LangChain vector store."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from ragtiller.errors import ConfigurationError, IngestError

EMBED_KEY_ENV = "RAGTILLER_EMBED_API_KEY"  # where --embed-url's API key is read, by default


def _ingest(args: argparse.Namespace) -> int:
    from ragtiller.core.retry import RetryPolicy
    from ragtiller.index import ChunkingConfig
    from ragtiller.ingest import ingest

    if args.max_file_mb <= 0:
        raise IngestError(f"--max-file-mb must be > 0, but got {args.max_file_mb}")
    options = {"header": args.chunk_header} if args.chunk_header else {}
    if args.chunk_window:
        options["window"] = args.chunk_window
    chunking = ChunkingConfig(
        chunk_tokens=args.chunk_tokens, overlap_tokens=args.overlap_tokens, **options
    )
    if args.vector_dtype != "float32" and (args.pinecone or args.store is not None):
        raise ConfigurationError(
            "--vector-dtype sets the embedded index's storage: not with --pinecone or --store"
        )
    embedder = _embedder(args)
    if args.pinecone:
        return _ingest_to_pinecone(args, embedder, chunking)
    if args.store is not None:
        return _ingest_to_store(args, embedder, chunking)
    service: dict[str, Any] = {"retry": RetryPolicy(attempts=1)} if args.embed_url else {}
    index = ingest(
        args.paths,
        args.index,
        embedder=embedder,
        **service,  # the service's driver retries; embedding again on top would repeat it
        chunking=chunking,
        cleanup=args.cleanup,
        max_file_bytes=int(args.max_file_mb * 1024 * 1024),
        progress=not args.quiet,
        vector_dtype=args.vector_dtype,
    )
    assert index.report is not None
    for skipped in index.report.skipped:
        print(f"skipped {skipped.path}: {skipped.reason}", file=sys.stderr)
    print(f"{args.index}: {index.report.summary()}")
    return 0


def _embedder(args: argparse.Namespace) -> Any:
    from ragtiller.integrations.demo import demo_embedder

    if args.embed_url is None:
        given = [  # the service's settings: every --embed-* flag but its key's variable
            f"--{name.replace('_', '-')}"
            for name, value in vars(args).items()
            if name.startswith("embed_") and name != "embed_key_env" and value is not None
        ]
        if given:
            raise ConfigurationError(f"{', '.join(given)} need --embed-url (the service)")
        return demo_embedder(args.embedder or "minilm")
    from ragtiller.models import OpenAICompatibleEmbeddings, ServiceEmbeddings

    if args.embedder is not None:
        raise ConfigurationError("give --embedder or --embed-url, not both")
    if not args.embed_model:
        raise ConfigurationError("--embed-url needs --embed-model (the model the service runs)")
    timeout_s = args.embed_timeout or 60.0
    client = OpenAICompatibleEmbeddings(
        args.embed_url,
        args.embed_model,
        api_key=os.environ.get(args.embed_key_env) or None,
        dimension=args.embed_dimension,
        timeout_s=timeout_s,
    )
    return ServiceEmbeddings(
        client,
        batch_size=args.embed_batch_size or 32,
        concurrency=args.embed_concurrency or 4,
        requests_per_s=args.embed_rate,
        texts_per_minute=args.embed_texts_per_minute,
        timeout_s=timeout_s,
    )


def _ingest_to_pinecone(args: argparse.Namespace, embedder: Any, chunking: Any) -> int:
    from ragtiller.ingest import SQLiteRecordManager
    from ragtiller.pinecone.env import HOST_ENV, INDEX_ENV, PineconeIndexSettings
    from ragtiller.pinecone.tiers import require_langchain_pinecone
    from ragtiller.pinecone.upsert import ingest_to_pinecone

    if args.records is None:
        raise ConfigurationError(
            "--pinecone needs --records FILE (what was written: a rerun resumes from it)"
        )
    settings = PineconeIndexSettings.from_env(os.environ, host_env=HOST_ENV, index_env=INDEX_ENV)
    if settings is None:
        raise ConfigurationError(
            f"--pinecone needs PINECONE_API_KEY, and {HOST_ENV} or {INDEX_ENV}, in the environment"
        )
    require_langchain_pinecone()
    from langchain_pinecone import PineconeVectorStore

    store = PineconeVectorStore(index=settings.connect(), embedding=embedder, text_key="text")
    records = SQLiteRecordManager(f"pinecone/{settings.host or settings.index_name}", args.records)
    done = ingest_to_pinecone(
        args.paths,
        store,
        records,
        cleanup=args.cleanup,
        chunking=chunking,
        batch_size=getattr(embedder, "batch_size", 100),
        concurrency=getattr(embedder, "concurrency", 1),
        max_file_bytes=int(args.max_file_mb * 1024 * 1024),
        progress=not args.quiet,
    )
    records.close()
    written = ", ".join(f"{ns}: {n}" for ns, n in sorted(done.upserted_by_namespace.items()))
    print(
        f"pinecone: documents: {done.documents}; chunks: {done.chunks}"
        + (f"; written per namespace: {written}" if written else "")
    )
    return 0


def _ingest_to_store(args: argparse.Namespace, embedder: Any, chunking: Any) -> int:
    """Into the store ``--store MODULE:FACTORY`` builds (the module found from the cwd)."""
    import importlib

    from ragtiller.ingest import SQLiteRecordManager
    from ragtiller.ingest.to_store import ingest_to_store

    if args.records is None:
        raise ConfigurationError(
            "--store needs --records FILE (what was written, for the next run)"
        )
    module_name, _, attr = args.store.partition(":")
    if not module_name or not attr:
        raise ConfigurationError(
            f"--store must be MODULE:FACTORY, e.g. my_stores:chroma; got {args.store!r}"
        )
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        factory = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as e:
        raise ConfigurationError(f"--store {args.store}: cannot load it: {e}") from e
    if not callable(factory):
        raise ConfigurationError(f"--store {args.store}: {attr} is not callable")
    store = factory(embedder)
    records = SQLiteRecordManager(args.store, args.records)
    records.create_schema()
    done = ingest_to_store(args.paths, store, records, cleanup=args.cleanup, chunking=chunking)
    print(f"{args.store}: documents: {done.documents}; chunks: {done.chunks}")
    return 0


def add_ingest_command(sub: Any) -> None:
    ing = sub.add_parser("ingest", help="Ingest files or directories into an index directory.")
    add = ing.add_argument
    add("paths", nargs="+", help="Markdown, reStructuredText, text or BEIR .jsonl files, or dirs.")
    target = ing.add_mutually_exclusive_group(required=True).add_argument
    target("--index", help="Index directory: created, or updated (only changed chunks embedded).")
    store_help = "Write to your own LangChain vector store, FACTORY(embedder); needs --records."
    target("--store", metavar="MODULE:FACTORY", help=store_help)
    target("--pinecone", action="store_true", help="Write to Pinecone (env); needs --records.")
    add("--records", help="With --store or --pinecone: the SQLite file of what was written.")
    add("--embedder", choices=["minilm", "hashing"], help="Default: minilm. Not with --embed-url.")
    svc = ing.add_argument_group(
        "embedding service", "An OpenAI-compatible POST /v1/embeddings service (TEI, vLLM...)."
    ).add_argument
    svc("--embed-url", help="The API root, e.g. http://tei:8080/v1.")
    svc("--embed-model", help="The model name sent with each request.")
    key_help = f"Environment variable holding the API key (default: {EMBED_KEY_ENV})."
    svc("--embed-key-env", default=EMBED_KEY_ENV, metavar="VAR", help=key_help)
    svc("--embed-dimension", type=int, help="Vector dimension (default: asked once).")
    svc("--embed-batch-size", type=int, help="Texts per call (default: 32).")
    svc("--embed-concurrency", type=int, help="Calls in flight at most (default: 4).")
    svc("--embed-rate", type=float, help="Calls started per second at most (default: no limit).")
    svc("--embed-texts-per-minute", type=float, help="Texts sent per minute at most (no limit).")
    svc("--embed-timeout", type=float, help="Deadline of one call, in seconds (default: 60).")
    add("--chunk-tokens", type=int, default=200, help="Child chunk size, in tokens.")
    add("--overlap-tokens", type=int, default=40, help="Overlap between child chunks, in tokens.")
    add("--chunk-header", choices=["title", "path"], help="What a chunk is indexed under.")
    add("--chunk-window", choices=["embedder", "words"], help="Default: words (the word bound).")
    dtypes = ["float32", "float16"]
    add("--vector-dtype", choices=dtypes, default="float32", help="Default: float32.")
    cleanups = ["full", "incremental"]
    add("--cleanup", choices=cleanups, default="full", help="Default: full (exactly these paths).")
    add("--max-file-mb", type=float, default=64.0, help="Skip larger files, in MiB (default: 64).")
    add("--quiet", action="store_true", help="No progress bar.")
    ing.set_defaults(func=_ingest)
