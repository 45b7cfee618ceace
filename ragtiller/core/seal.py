"""Seals: an HMAC-SHA256 over a small JSON record, so a value a node wrote into the graph state
can be told apart from one a caller wrote there (``update_state``, a ``Command``, a ``Send``):
LangGraph lets whoever can run a thread write any channel, but not make a seal. The key is
``RAGTILLER_SCOPE_KEY`` (the same on every replica), else one kept per machine, else per process.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import hmac
import json
import logging
import os
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from platformdirs import user_data_dir

from ragtiller.errors import ConfigurationError

KEY_ENV = "RAGTILLER_SCOPE_KEY"
MIN_KEY_CHARS = 32
KEY_BYTES = 32  # the size of a key made for this machine

log = logging.getLogger(__name__)


def key_file() -> Path:
    return Path(user_data_dir("ragtiller")) / "scope.key"


@functools.cache
def seal_key() -> bytes:
    given = os.environ.get(KEY_ENV)
    if given:
        if len(given) < MIN_KEY_CHARS:
            raise ConfigurationError(
                f"{KEY_ENV} must hold at least {MIN_KEY_CHARS} characters, got {len(given)}; "
                'make one with: python -c "import secrets; print(secrets.token_hex(32))"'
            )
        return given.encode("utf-8")
    path = key_file()
    try:
        return machine_key(path)
    except OSError as e:
        log.warning(
            "cannot keep the scope seal key in %s (%s): this process uses its own key, so a "
            "thread it seals does not verify in another process; set %s",
            path,
            e.strerror or e,
            KEY_ENV,
        )
        return secrets.token_bytes(KEY_BYTES)


def machine_key(path: Path) -> bytes:
    """The key at ``path``, made first (mode 0600) when there is none: written aside, then
    hard-linked, so two racing processes both read the key that won."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        draft = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
        descriptor = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(descriptor, "wb") as out:
                out.write(secrets.token_bytes(KEY_BYTES))
                out.flush()
                os.fsync(out.fileno())
            with contextlib.suppress(FileExistsError):  # another process made it first
                os.link(draft, path)
        finally:
            draft.unlink(missing_ok=True)
    key = path.read_bytes()
    if len(key) != KEY_BYTES:
        raise OSError(f"the file holds {len(key)} bytes, not a {KEY_BYTES}-byte key")
    return key


def seal(record: Mapping[str, Any]) -> str:
    """The seal of ``record`` (JSON data): HMAC-SHA256 of its canonical JSON, in hex."""
    text = json.dumps(record, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hmac.new(seal_key(), text.encode("ascii"), hashlib.sha256).hexdigest()


def verifies(record: Mapping[str, Any], given: Any) -> bool:
    """Whether ``given`` is the seal of ``record``, in constant time; False for anything else."""
    if not isinstance(given, str) or not given.isascii():
        return False
    try:
        expected = seal(record)
    except (TypeError, ValueError):
        return False
    return hmac.compare_digest(expected, given)
