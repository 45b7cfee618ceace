"""The ``ragtiller`` command. Every error becomes one line on stderr and an exit code per kind
of failure, so scripts can tell a bad flag (fix the command) from a missing index (run
``ingest``), a store that is down (retry later) and a bug (rerun with ``--debug``)."""

from __future__ import annotations

import argparse
import io
import json
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

import ragtiller
from ragtiller.cli.ingest import add_ingest_command
from ragtiller.core.redact import redact
from ragtiller.errors import (
    EmbeddingError,
    IndexStoreError,
    RagtillerError,
    StoreUnavailableError,
    TierUnavailable,
)
from ragtiller.graph.builder import build_graph
from ragtiller.integrations.display import citations, stage_table, summary
from ragtiller.policies import load_policy
from ragtiller.policies.fields import fields_table

EXIT_UNEXPECTED = 1  # a bug or an error ragtiller did not foresee
EXIT_USAGE = 2  # bad arguments, configuration, policy or input (argparse uses 2 too)
EXIT_INDEX = 3  # the index is missing, partial, corrupt or of another embedder, or saving failed
EXIT_STORE = 4  # a shared store (Redis) could not be reached
EXIT_PROVIDER = 5  # a provider (embedder, tier backend) failed after its retries
EXIT_INTERRUPTED = 130  # Ctrl-C, as a shell reports SIGINT

_BY_CLASS: tuple[tuple[type[BaseException], int], ...] = (
    (IndexStoreError, EXIT_INDEX),
    (StoreUnavailableError, EXIT_STORE),
    (EmbeddingError, EXIT_PROVIDER),
    (TierUnavailable, EXIT_PROVIDER),
    (RagtillerError, EXIT_USAGE),
    (KeyboardInterrupt, EXIT_INTERRUPTED),
)


def exit_code(error: BaseException) -> int:
    """The exit code for ``error``: the first class in the table it is an instance of, else 1."""
    return next((code for cls, code in _BY_CLASS if isinstance(error, cls)), EXIT_UNEXPECTED)


def error_line(error: BaseException, *, debug: bool = False) -> str:
    """The single line printed for ``error`` (credentials redacted, line breaks folded)."""
    if isinstance(error, KeyboardInterrupt):
        return "ragtiller: interrupted"
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    message = redact(" ".join([lines[0], "; ".join(lines[1:])]).strip()) if lines else ""
    if exit_code(error) != EXIT_UNEXPECTED:
        return f"ragtiller: error: {message or type(error).__name__}"
    hint = "" if debug else " (rerun with --debug for the traceback)"
    named = f"{type(error).__name__}: {message}" if message else type(error).__name__
    return f"ragtiller: unexpected error: {named}{hint}"


SHOWN_QUERY_CHARS = 200  # a pasted document need not be echoed whole in the turn's header
DEBUG_HELP = "On an error, also print the Python traceback."


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
    manifest = out["manifest"]
    print(f"\n=== {shown_query(query)}")
    print(summary(manifest))
    if out["documents"]:
        print("\n" + citations(out["documents"]))
    print("\n" + stage_table(manifest))
    if context and out["context"]:
        print("\n--- context ---\n" + out["context"])


def shown_query(query: str) -> str:
    """The query quoted, cut after :data:`SHOWN_QUERY_CHARS`.

    Example:
        >>> shown_query("wing " * 100)[-30:]
        "ing wing '... (500 characters)"
    """
    if len(query) <= SHOWN_QUERY_CHARS:
        return repr(query)
    return f"{query[:SHOWN_QUERY_CHARS]!r}... ({len(query):,} characters)"


def warm_up(embedder: Any) -> float:
    """Load the embedder's model now, so no turn's ``embed`` latency holds it (in ms)."""
    started = time.perf_counter()
    if embedder is not None:
        embedder.embed_query("warm-up")
    return (time.perf_counter() - started) * 1000.0


def _ask(args: argparse.Namespace) -> int:
    from ragtiller.graph import tiers_for_policy
    from ragtiller.index import open_index

    policy = load_policy(args.policy)
    index = open_index(args.index)
    graph = build_graph(policy, index=index, tiers=tiers_for_policy(policy, index))
    load_ms = warm_up(index.embedder)
    namespace = args.namespace[0] if args.namespace and len(args.namespace) == 1 else args.namespace
    context = {"top_k": args.top_k, "namespace": namespace, "tenant": args.tenant}
    out, events = run_turn(
        graph, args.question, {k: v for k, v in context.items() if v is not None}
    )
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
    from ragtiller.cli.eval import POLICY_HELP, add_commands

    top = argparse.ArgumentParser(
        prog="ragtiller", description="Quota-aware, policy-driven retrieval graph."
    )
    top.add_argument("--debug", action="store_true", help=DEBUG_HELP)
    top.add_argument("--version", action="version", version=f"ragtiller {ragtiller.__version__}")
    sub = top.add_subparsers(dest="command", required=True)
    add_ingest_command(sub)

    ask = sub.add_parser("ask", help="Run one turn; print its documents and stage table.")
    add = ask.add_argument
    add("question", help="The question, in quotes.")
    add("--index", required=True, help="Index directory made by `ragtiller ingest`.")
    add("--policy", help=POLICY_HELP)
    add("--top-k", type=int, help="Documents to return (default: the route's).")
    add("--namespace", action="append", help="Search this namespace instead (repeatable).")
    add("--tenant", help="Tenant id, used as a metadata filter.")
    add("--context", action="store_true", help="Also print the prompt-ready context text.")
    add(
        "--json",
        action="store_true",
        help="Print JSON: load_ms, documents, context, manifest, events.",
    )
    ask.set_defaults(func=_ask)

    demo = sub.add_parser("demo", help="Index the stdlib docs (cached); ask one per route.")
    add = demo.add_argument
    add("--embedder", choices=["minilm", "hashing"], default="minilm", help="Default: minilm.")
    add("--policy", help=POLICY_HELP)
    add("--question", action="append", help="Ask this instead of the built-in questions.")
    add("--context", action="store_true", help="Also print the full context text.")
    add("--cache-dir", type=Path, help="Where to cache the demo index.")
    add("--rebuild", action="store_true", help="Rebuild the cached demo index.")
    demo.set_defaults(func=_demo)

    model = sub.add_parser("model", help="Manage the bundled local model.")
    prepare = model.add_subparsers(dest="model_command", required=True).add_parser(
        "prepare", help="Export the bundled all-MiniLM-L6-v2 to ONNX once (needs torch)."
    )
    prepare.add_argument(
        "--variant", choices=["uint8", "fp32"], default="uint8", help="Default: uint8."
    )
    prepare.add_argument("--force", action="store_true", help="Export again even if cached.")
    prepare.set_defaults(func=_model_prepare)

    draw = sub.add_parser("draw", help="Print the graph as Mermaid, or write a PNG.")
    draw.add_argument("--png", type=Path, help="Write a PNG here instead of printing Mermaid.")
    draw.set_defaults(func=_draw)

    add_commands(sub)
    policy = sub.add_parser("policy", help="Show retrieval policies.")
    show = policy.add_subparsers(dest="policy_command", required=True).add_parser(
        "show", help="Print the effective policy, every default filled in."
    )
    show.add_argument("name", nargs="?", help="Policy name or YAML path (default: default).")
    show.add_argument("--fields", action="store_true", help="Print every field and what it does.")
    show.set_defaults(func=_policy_show)
    _share_options(top)
    return top


def _policy_show(args: argparse.Namespace) -> int:
    policy = load_policy(args.name)
    if args.fields:
        print(fields_table(policy), end="")
    else:
        print(yaml.safe_dump(policy.model_dump(mode="json"), sort_keys=False), end="")
    return 0


def _share_options(parser: argparse.ArgumentParser) -> None:
    """Accept ``--debug`` after any subcommand too (``SUPPRESS``: the top-level value stands)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                child.add_argument(
                    "--debug", action="store_true", default=argparse.SUPPRESS, help=DEBUG_HELP
                )
                _share_options(child)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``ragtiller``: any exception is one line on stderr and its exit code;
    text the terminal cannot encode (a lone surrogate from argv) is escaped."""
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
