"""``ragtiller ingest``: into an index directory, Pinecone, or any LangChain vector store."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any


def _ingest(args: argparse.Namespace) -> int:
    from ragtiller.core.retry import RetryPolicy
    from ragtiller.errors import IngestError
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
        from ragtiller.errors import ConfigurationError

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


EMBED_KEY_ENV = "RAGTILLER_EMBED_API_KEY"
"""The variable ``ingest --embed-url`` reads the service's API key from, unless told another."""
_SERVICE_FLAGS = (
    "embed_model",
    "embed_dimension",
    "embed_batch_size",
    "embed_concurrency",
    "embed_rate",
    "embed_texts_per_minute",
    "embed_timeout",
)


def _embedder(args: argparse.Namespace) -> Any:
    """The bundled embedder ``--embedder`` names, or the ``--embed-url`` service's driver."""
    from ragtiller.errors import ConfigurationError
    from ragtiller.integrations.demo import demo_embedder

    if args.embed_url is None:
        given = [f"--{f.replace('_', '-')}" for f in _SERVICE_FLAGS if getattr(args, f) is not None]
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
    """``ingest --pinecone``: read, chunk, embed and upsert, batch by batch, resumable."""
    from ragtiller.errors import ConfigurationError
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


def _store_factory(spec: str) -> Any:
    """The callable ``module:function`` names (the module found from the working directory)."""
    import importlib

    from ragtiller.errors import ConfigurationError

    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise ConfigurationError(
            f"--store must be MODULE:FACTORY, e.g. my_stores:chroma; got {spec!r}"
        )
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        factory = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as e:
        raise ConfigurationError(f"--store {spec}: cannot load it: {e}") from e
    if not callable(factory):
        raise ConfigurationError(f"--store {spec}: {attr} is not callable")
    return factory


def _ingest_to_store(args: argparse.Namespace, embedder: Any, chunking: Any) -> int:
    """``ingest --store``: the same read and chunking, written to the user's vector store."""
    from ragtiller.errors import ConfigurationError
    from ragtiller.ingest import SQLiteRecordManager
    from ragtiller.ingest.to_store import ingest_to_store

    if args.records is None:
        raise ConfigurationError(
            "--store needs --records FILE (what was written, for the next run)"
        )
    store = _store_factory(args.store)(embedder)
    records = SQLiteRecordManager(args.store, args.records)
    records.create_schema()
    done = ingest_to_store(args.paths, store, records, cleanup=args.cleanup, chunking=chunking)
    print(f"{args.store}: documents: {done.documents}; chunks: {done.chunks}")
    return 0


def add_ingest_command(sub: Any) -> None:
    """Add ``ingest`` to the ``ragtiller`` command's subparsers."""
    ing = sub.add_parser("ingest", help="Ingest files or directories into an index directory.")
    ing.add_argument(
        "paths",
        nargs="+",
        help="Markdown, reStructuredText, text or BEIR .jsonl files, or directories.",
    )
    target = ing.add_mutually_exclusive_group(required=True)
    target.add_argument(
        "--index",
        help="Index directory: created, or brought up to date (only changed chunks are embedded).",
    )
    target.add_argument(
        "--store",
        metavar="MODULE:FACTORY",
        help="Write to your own LangChain vector store instead: FACTORY(embedder) returns it "
        "(e.g. a persistent Chroma); needs --records.",
    )
    target.add_argument(
        "--pinecone",
        action="store_true",
        help="Write to the Pinecone index PINECONE_API_KEY and PINECONE_HOST (or PINECONE_INDEX) "
        "name, each chunk to its namespace, batch by batch; needs --records. Killed midway, "
        "a rerun resumes: only chunks not recorded are embedded again.",
    )
    ing.add_argument(
        "--records",
        help="With --store or --pinecone: the SQLite file that remembers what was written, so "
        "a re-run writes only what changed (or was not written yet).",
    )
    ing.add_argument(
        "--embedder",
        choices=["minilm", "hashing"],
        default=None,
        help="Default: minilm (bundled, offline). Not with --embed-url.",
    )
    service = ing.add_argument_group(
        "embedding service",
        "Embed with an OpenAI-compatible POST /v1/embeddings service (TEI, vLLM, OpenAI...) "
        "instead of a bundled model: batched, several calls in flight, rate-limited, retried "
        "on 429/5xx/timeouts (honouring Retry-After).",
    )
    service.add_argument("--embed-url", help="The API root, e.g. http://tei:8080/v1.")
    service.add_argument("--embed-model", help="The model name sent with each request.")
    service.add_argument(
        "--embed-key-env",
        default=EMBED_KEY_ENV,
        metavar="VAR",
        help=f"Environment variable holding the API key (default: {EMBED_KEY_ENV}; unset: none).",
    )
    service.add_argument(
        "--embed-dimension", type=int, help="Vector dimension (default: asked once)."
    )
    service.add_argument("--embed-batch-size", type=int, help="Texts per call (default: 32).")
    service.add_argument(
        "--embed-concurrency", type=int, help="Calls in flight at most (default: 4)."
    )
    service.add_argument(
        "--embed-rate", type=float, help="Calls started per second at most (default: no limit)."
    )
    service.add_argument(
        "--embed-texts-per-minute",
        type=float,
        help="Texts sent per minute at most (default: no limit).",
    )
    service.add_argument(
        "--embed-timeout", type=float, help="Deadline of one call, in seconds (default: 60)."
    )
    ing.add_argument("--chunk-tokens", type=int, default=200, help="Child chunk size, in tokens.")
    ing.add_argument(
        "--overlap-tokens", type=int, default=40, help="Overlap between child chunks, in tokens."
    )
    ing.add_argument(
        "--chunk-header",
        choices=["title", "path"],
        help="What each chunk is indexed under before its text: title (the document title) "
        "or path (the title and the chunk's headings). Default: chunking.header's default.",
    )
    ing.add_argument(
        "--chunk-window",
        choices=["embedder", "words"],
        help="What else bounds a chunk: words (the word bound alone; the default) or embedder "
        "(its indexed text also fits the embedder's input window, by the embedder's own "
        "tokenizer, where it has one).",
    )
    ing.add_argument(
        "--vector-dtype",
        choices=["float32", "float16"],
        default="float32",
        help="How the index stores its vectors: float32 (default) or float16 (half the "
        "memory; scores are still computed in float32). Recorded in the manifest.",
    )
    ing.add_argument(
        "--cleanup",
        choices=["full", "incremental"],
        default="full",
        help="full (default): the index holds exactly these paths; incremental: documents "
        "indexed before but not given here are kept.",
    )
    ing.add_argument(
        "--max-file-mb",
        type=float,
        default=64.0,
        help="Skip files larger than this, in MiB (default: 64).",
    )
    ing.add_argument("--quiet", action="store_true", help="No progress bar.")
    ing.set_defaults(func=_ingest)
