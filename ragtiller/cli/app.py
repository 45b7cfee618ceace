"""The ``ragtiller`` command: ingest, ask, demo, draw, eval, promote.

Every error becomes one line on stderr and an exit code per kind (see
:mod:`ragtiller.cli.exit_codes`); the traceback only with ``ragtiller --debug``.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import ragtiller
from ragtiller.cli.exit_codes import error_line, exit_code
from ragtiller.cli.policy import add_policy_commands
from ragtiller.graph.builder import build_graph
from ragtiller.integrations.display import citations, stage_table, summary
from ragtiller.policies import load_policy


def run_turn(
    graph: Any, query: str, context: dict[str, Any] | None = None
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One turn, streamed: the output and the ``pipeline:step`` events."""
    events: list[dict[str, Any]] = []
    out: dict[str, Any] = {}
    for mode, chunk in graph.stream(
        {"query": query}, context=context or None, stream_mode=["custom", "values"]
    ):
        if mode == "custom":
            events.append(chunk)
        else:
            out = chunk
    return out, events


def print_turn(query: str, out: dict[str, Any], *, context: bool = False) -> None:
    """The human view of a turn: summary, documents, the stage table, optionally the context."""
    manifest = out["manifest"]
    print(f"\n=== {shown_query(query)}")
    print(summary(manifest))
    if out["documents"]:
        print("\n" + citations(out["documents"]))
    print("\n" + stage_table(manifest))
    if context and out["context"]:
        print("\n--- context ---\n" + out["context"])


SHOWN_QUERY_CHARS = 200
"""How much of a query the turn's header repeats: a pasted document need not be echoed whole."""


def shown_query(query: str) -> str:
    """The query as the header shows it: quoted, and cut after :data:`SHOWN_QUERY_CHARS`.

    Example:
        >>> shown_query("wing " * 100)[-30:]
        "ing wing '... (500 characters)"
    """
    if len(query) <= SHOWN_QUERY_CHARS:
        return repr(query)
    return f"{query[:SHOWN_QUERY_CHARS]!r}... ({len(query):,} characters)"


def warm_up(embedder: Any) -> float:
    """Load the embedder's model now (one embedding), so no turn's ``embed`` latency holds it.

    Returns:
        How long it took, in milliseconds.
    """
    started = time.perf_counter()
    if embedder is not None:
        embedder.embed_query("warm-up")
    return (time.perf_counter() - started) * 1000.0


def _run_context(args: argparse.Namespace) -> dict[str, Any]:
    """The run context the ``ask`` flags set (unset flags are left to the policy)."""
    namespace = args.namespace[0] if args.namespace and len(args.namespace) == 1 else args.namespace
    context = {"top_k": args.top_k, "namespace": namespace, "tenant": args.tenant}
    return {key: value for key, value in context.items() if value is not None}


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
    from ragtiller.pinecone.calls import require_langchain_pinecone
    from ragtiller.pinecone.env import HOST_ENV, INDEX_ENV, PineconeIndexSettings
    from ragtiller.pinecone.index_sync import ingest_to_pinecone

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


def _ask(args: argparse.Namespace) -> int:
    from ragtiller.graph import tiers_for_policy
    from ragtiller.index import open_index

    policy = load_policy(args.policy)
    index = open_index(args.index)
    graph = build_graph(policy, index=index, tiers=tiers_for_policy(policy, index))
    load_ms = warm_up(index.embedder)
    out, events = run_turn(graph, args.question, _run_context(args))
    if args.json:
        payload = {
            "load_ms": round(load_ms, 1),
            "documents": [
                {"page_content": d.page_content, "metadata": d.metadata} for d in out["documents"]
            ],
            "context": out["context"],
            "manifest": out["manifest"].model_dump(mode="json"),
            "events": events,
        }
        print(json.dumps(payload, indent=2, default=str))
    else:
        print(f"embedder loaded in {load_ms:.0f} ms (before the turn; not in its latency)")
        print_turn(args.question, out, context=args.context)
    return 0


def _demo(args: argparse.Namespace) -> int:
    from ragtiller.integrations.demo import DEMO_QUESTIONS, demo_embedder, demo_index

    index = demo_index(demo_embedder(args.embedder), cache_dir=args.cache_dir, rebuild=args.rebuild)
    graph = build_graph(args.policy, index=index)
    print(f"embedder loaded in {warm_up(index.embedder):.0f} ms (before the first turn)")
    for question in args.question or DEMO_QUESTIONS:
        out, _ = run_turn(graph, question)
        print_turn(question, out, context=args.context)
    return 0


def _model_prepare(args: argparse.Namespace) -> int:
    import time

    from ragtiller.models.onnx_model import prepare_model, prepared_model

    cached = prepared_model(args.variant).onnx_path.is_file() and not args.force
    started = time.perf_counter()
    model = prepare_model(args.variant, force=args.force)
    took = "already cached" if cached else f"exported in {time.perf_counter() - started:.1f} s"
    print(f"all-MiniLM-L6-v2 onnx-{model.variant}: {model.onnx_path} ({took})")
    return 0


def _draw(args: argparse.Namespace) -> int:
    from ragtiller.graph.draw import mermaid, png

    if args.png:
        png(str(args.png))
        print(f"wrote {args.png}")
    else:
        print(mermaid(), end="")
    return 0


def parser() -> argparse.ArgumentParser:
    """The argument parser (exposed for docs and tests)."""
    from ragtiller.cli.eval import add_commands

    top = argparse.ArgumentParser(
        prog="ragtiller", description="Quota-aware, policy-driven retrieval graph."
    )
    top.add_argument("--debug", action="store_true", help=DEBUG_HELP)
    top.add_argument("--version", action="version", version=f"ragtiller {ragtiller.__version__}")
    sub = top.add_subparsers(dest="command", required=True)

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

    ask = sub.add_parser(
        "ask", help="Run one turn and print its documents and stage table (--context: the text)."
    )
    ask.add_argument("question", help="The question, in quotes.")
    ask.add_argument("--index", required=True, help="Index directory made by `ragtiller ingest`.")
    ask.add_argument(
        "--policy", default=None, help="Policy YAML file or shipped policy name (default: default)."
    )
    ask.add_argument(
        "--top-k", type=int, default=None, help="Documents to return (default: the route's)."
    )
    ask.add_argument(
        "--namespace",
        action="append",
        help="Search this namespace instead of the route's (repeatable).",
    )
    ask.add_argument("--tenant", default=None, help="Tenant id, used as a metadata filter.")
    ask.add_argument(
        "--context", action="store_true", help="Also print the prompt-ready context text."
    )
    ask.add_argument(
        "--json",
        action="store_true",
        help="Print one JSON object: load_ms, documents, context, manifest, events.",
    )
    ask.set_defaults(func=_ask)

    demo = sub.add_parser(
        "demo", help="Index the stdlib docs (cached) and ask one question per route."
    )
    demo.add_argument(
        "--embedder",
        choices=["minilm", "hashing"],
        default="minilm",
        help="Default: minilm (bundled, offline); hashing needs no model.",
    )
    demo.add_argument(
        "--policy", default=None, help="Policy YAML file or shipped policy name (default: default)."
    )
    demo.add_argument(
        "--question",
        action="append",
        help="Ask this instead of the built-in questions (repeatable).",
    )
    demo.add_argument("--context", action="store_true", help="Also print the full context text.")
    demo.add_argument("--cache-dir", type=Path, default=None, help="Where to cache the demo index.")
    demo.add_argument("--rebuild", action="store_true", help="Rebuild the cached demo index.")
    demo.set_defaults(func=_demo)

    model = sub.add_parser("model", help="Manage the bundled local model.")
    model_sub = model.add_subparsers(dest="model_command", required=True)
    prepare = model_sub.add_parser(
        "prepare",
        help="Export the bundled all-MiniLM-L6-v2 to ONNX once and cache it (needs torch).",
    )
    prepare.add_argument(
        "--variant",
        choices=["uint8", "fp32"],
        default="uint8",
        help="uint8 (the default embedder's) or fp32 (identical to sentence-transformers).",
    )
    prepare.add_argument("--force", action="store_true", help="Export again even if cached.")
    prepare.set_defaults(func=_model_prepare)

    draw = sub.add_parser(
        "draw", help="Print the graph as Mermaid, or write a PNG (offline, ragtiller[draw])."
    )
    draw.add_argument(
        "--png", type=Path, default=None, help="Write a PNG here instead of printing Mermaid."
    )
    draw.set_defaults(func=_draw)

    add_commands(sub)
    add_policy_commands(sub)
    _share_options(top)
    return top


DEBUG_HELP = "On an error, also print the Python traceback."


def _share_options(parser: argparse.ArgumentParser) -> None:
    """Accept the shared options after any subcommand too (``ragtiller ask Q --debug``).

    A subcommand's copy has no default of its own (``SUPPRESS``), so the top-level value stands
    unless the option is given after the subcommand.
    """
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                child.add_argument(
                    "--debug", action="store_true", default=argparse.SUPPRESS, help=DEBUG_HELP
                )
                _share_options(child)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``ragtiller`` command; returns the exit code.

    Nothing escapes: any exception is one line on stderr and its exit code
    (:func:`ragtiller.cli.exit_codes.exit_code`), with the traceback first under ``--debug``.
    Text that cannot be encoded for the terminal (a lone surrogate from argv) is escaped.
    """
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")
    args = parser().parse_args(argv)
    try:
        code: int = args.func(args)
    except (Exception, KeyboardInterrupt) as e:
        if args.debug:
            traceback.print_exc()
        print(error_line(e, debug=args.debug), file=sys.stderr)
        return exit_code(e)
    return code


if __name__ == "__main__":
    sys.exit(main())
