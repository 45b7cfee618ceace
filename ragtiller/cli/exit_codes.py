"""Exit codes of the ``ragtiller`` command, one per kind of failure, and the one line it prints.

Scripts can tell a bad flag or policy (fix the command) from a missing index (run ``ingest``),
a store that is down (retry later) and a bug (report it, with ``--debug``).
"""

from __future__ import annotations

from ragtiller.core.redact import redact
from ragtiller.errors import (
    EmbeddingError,
    IndexStoreError,
    RagtillerError,
    StoreUnavailableError,
    TierUnavailable,
)

EXIT_UNEXPECTED = 1
"""A bug or an error ragtiller did not foresee; ``--debug`` shows the traceback."""
EXIT_USAGE = 2
"""Bad arguments, configuration (a malformed ``REDIS_URL``), policy or input (a document id two
sources share); argparse uses 2 for usage errors too."""
EXIT_INDEX = 3
"""The index directory is missing, partial, corrupt or built with another embedder, or the disk
or file system failed while saving it (full, read-only, denied); the line names the path."""
EXIT_STORE = 4
"""A shared store (Redis) could not be reached."""
EXIT_PROVIDER = 5
"""A provider (embedder, tier backend) failed after its retries."""
EXIT_INTERRUPTED = 130
"""Ctrl-C, as a shell reports SIGINT."""

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
    for cls, code in _BY_CLASS:
        if isinstance(error, cls):
            return code
    return EXIT_UNEXPECTED


def error_line(error: BaseException, *, debug: bool = False) -> str:
    """The single line printed for ``error`` (credentials redacted, line breaks folded).

    Example:
        >>> from ragtiller.errors import IndexStoreError
        >>> error_line(IndexStoreError("no index at ./idx; run `ragtiller ingest` first"))
        'ragtiller: error: no index at ./idx; run `ragtiller ingest` first'
        >>> error_line(TypeError("unhashable type: 'list'"))
        "ragtiller: unexpected error: TypeError: unhashable type: 'list' (rerun with --debug for the traceback)"
    """
    if isinstance(error, KeyboardInterrupt):
        return "ragtiller: interrupted"
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    message = redact(" ".join([lines[0], "; ".join(lines[1:])]).strip()) if lines else ""
    if exit_code(error) != EXIT_UNEXPECTED:
        return f"ragtiller: error: {message or type(error).__name__}"
    hint = "" if debug else " (rerun with --debug for the traceback)"
    named = f"{type(error).__name__}: {message}" if message else type(error).__name__
    return f"ragtiller: unexpected error: {named}{hint}"
