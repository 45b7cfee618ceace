"""Exit codes of the ``ragtiller`` command, one per kind of failure, and the one line it prints:
scripts can tell a bad flag (fix the command) from a missing index (run ``ingest``), a store
that is down (retry later) and a bug (report it, with ``--debug``)."""

from __future__ import annotations

from ragtiller.core.redact import redact
from ragtiller.errors import (
    EmbeddingError,
    IndexStoreError,
    RagtillerError,
    StoreUnavailableError,
    TierUnavailable,
)

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
