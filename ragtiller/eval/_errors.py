"""The evaluation harness's exception."""

from __future__ import annotations

from ragtiller.errors import RagtillerError


class EvalError(RagtillerError, ValueError):
    """An eval dataset, run or comparison is invalid; the message names the file or query."""
