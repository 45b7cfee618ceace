"""Versioned index directories: every save writes a new version, then switches a pointer.

Layout of an index directory::

    CURRENT                 the name of the version readers open ("v000007")
    versions/v000006/       the previous version, kept for readers that are opening it
    versions/v000007/       the current version: manifest.json, chunks.jsonl, vectors.npy, ...
    versions/.v000008.partial/   a save in progress (or killed); removed by the next save
    .lock                   serialises saves (flock; released by the kernel if a saver dies)

A save writes and fsyncs a complete version under a partial name, renames it into place,
then replaces ``CURRENT`` with ``os.replace`` (atomic on POSIX). A reader resolves ``CURRENT``
once and opens that version; if a save removed it in between, the reader resolves again. So
an open never sees half a version, and a crash at any point leaves the old version or the
new one current, never neither.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from ragtiller.errors import IndexStoreError

POINTER_FILE = "CURRENT"
VERSIONS_DIR = "versions"
LOCK_FILE = ".lock"
LEGACY_MANIFEST = "manifest.json"
LEGACY_ENTRIES = ("chunks.jsonl", "vectors.npy", "parents.jsonl", "corpus_map.txt", "lexical")
"""An index saved before versioning held these and ``manifest.json`` directly in the directory;
the first versioned save removes them once ``CURRENT`` is in place."""
_VERSION = re.compile(r"v(\d{6,})")
_OPEN_ATTEMPTS = 10

T = TypeVar("T")
FaultHook = Callable[[str], None]
"""Called with a step name before every file operation of a save; tests raise in it."""
Step = Callable[[str], None]


def _no_fault(step: str) -> None:
    """The default fault hook: every step proceeds."""


def is_index_directory(directory: Path) -> bool:
    """Whether ``directory`` holds a versioned or a legacy index (or a save in progress)."""
    return any(
        (directory / name).exists() for name in (POINTER_FILE, VERSIONS_DIR, LEGACY_MANIFEST)
    )


def check_writable(directory: Path) -> None:
    """Refuse a directory that is not empty and holds no index: a save never overwrites it.

    Raises:
        IndexStoreError: ``directory`` is a file, or a non-empty directory without an index.
    """
    if directory.exists() and not directory.is_dir():
        raise IndexStoreError(f"refusing to save into {directory}: it is a file, not a directory")
    if directory.exists() and any(directory.iterdir()) and not is_index_directory(directory):
        raise IndexStoreError(
            f"refusing to save into {directory}: it is not empty and holds no index; "
            "choose an empty or new directory"
        )


def current_version(directory: Path) -> Path:
    """The version directory ``CURRENT`` names (or ``directory`` itself for a legacy index).

    Raises:
        IndexStoreError: No index at ``directory``, or ``CURRENT`` names a version that is gone.
    """
    if not directory.is_dir():
        raise IndexStoreError(f"no index at {directory}: directory not found")
    try:
        name = (directory / POINTER_FILE).read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        if (directory / LEGACY_MANIFEST).is_file():
            return directory
        raise IndexStoreError(
            f"no index at {directory}: {POINTER_FILE} not found (not an index directory, or "
            "its first save did not finish)"
        ) from None
    except (OSError, UnicodeDecodeError) as e:
        raise IndexStoreError(f"index file {directory / POINTER_FILE} is unreadable: {e}") from e
    if not _VERSION.fullmatch(name):
        raise IndexStoreError(
            f"index file {directory / POINTER_FILE} is corrupt: it names {name!r}, not a version"
        )
    return directory / VERSIONS_DIR / name


def open_current(directory: Path, open_version: Callable[[Path], T]) -> T:
    """Open the current version with ``open_version``, resolving ``CURRENT`` again if a save
    removed the version between resolving and opening.

    Only a reader slower than two whole saves needs the retry; each retry resolves the newest
    version, so it succeeds unless saves keep overtaking it ``_OPEN_ATTEMPTS`` times.

    Raises:
        IndexStoreError: What ``open_version`` raised (a file error wrapped), when ``CURRENT`` did
            not move meanwhile.
    """
    for attempt in range(_OPEN_ATTEMPTS):
        version = current_version(directory)
        try:
            return open_version(version)
        except (IndexStoreError, OSError) as e:
            if attempt == _OPEN_ATTEMPTS - 1 or current_version(directory) == version:
                if isinstance(e, IndexStoreError):
                    raise
                raise IndexStoreError(f"index at {version} could not be read: {e}") from e
    raise AssertionError("unreachable")  # pragma: no cover


def write_version(
    directory: Path,
    write: Callable[[Path, Step], None],
    *,
    fault: FaultHook = _no_fault,
) -> Path:
    """Write a new version with ``write(version_dir, step)`` and make it current.

    ``write`` must call ``step(name)`` before each file it writes; ``fault`` is called at each
    of those steps and before each of this function's own file operations.

    Returns:
        The new version's directory.

    Raises:
        IndexStoreError: ``directory`` is not empty and is not an index directory.
    """
    check_writable(directory)
    directory.mkdir(parents=True, exist_ok=True)
    with _locked(directory):
        versions = directory / VERSIONS_DIR
        fault("mkdir versions")
        versions.mkdir(exist_ok=True)
        _remove_partials(versions, fault)
        name = f"v{_last_number(versions) + 1:06d}"
        partial = versions / f".{name}.partial"
        fault("mkdir partial")
        partial.mkdir()
        write(partial, fault)
        fault("fsync version")
        _fsync_tree(partial)
        final = versions / name
        fault("rename version")
        partial.rename(final)
        _fsync_dir(versions)
        previous = _pointer(directory)
        _switch_pointer(directory, name, fault)
        _remove_superseded(directory, versions, keep={name, previous}, fault=fault)
    return final


def _switch_pointer(directory: Path, name: str, fault: FaultHook) -> None:
    staged = directory / f".{POINTER_FILE}.next"
    fault("write pointer")
    with staged.open("w", encoding="utf-8") as f:
        f.write(name + "\n")
        f.flush()
        os.fsync(f.fileno())
    fault("switch pointer")
    os.replace(staged, directory / POINTER_FILE)
    _fsync_dir(directory)


def _pointer(directory: Path) -> str | None:
    try:
        return (directory / POINTER_FILE).read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return None


def _remove_superseded(
    directory: Path, versions: Path, *, keep: set[str | None], fault: FaultHook
) -> None:
    """Remove every version but the new one and the one it replaced, and legacy files.

    The replaced version stays for readers that resolved ``CURRENT`` just before the switch.
    """
    for old in sorted(versions.iterdir()):
        if _VERSION.fullmatch(old.name) and old.name not in keep:
            fault(f"remove {old.name}")
            shutil.rmtree(old, ignore_errors=True)
    if (directory / LEGACY_MANIFEST).exists():
        for entry in (*LEGACY_ENTRIES, LEGACY_MANIFEST):
            path = directory / entry
            fault(f"remove legacy {entry}")
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)


def _remove_partials(versions: Path, fault: FaultHook) -> None:
    """Remove versions left half-written by a killed save (only one saver holds the lock)."""
    for path in versions.iterdir():
        if path.name.endswith(".partial"):
            fault(f"remove {path.name}")
            shutil.rmtree(path, ignore_errors=True)


def _last_number(versions: Path) -> int:
    numbers = [
        int(m.group(1))
        for p in versions.iterdir()
        if (m := _VERSION.fullmatch(p.name.removeprefix(".").removesuffix(".partial")))
    ]
    return max(numbers, default=0)


@contextmanager
def _locked(directory: Path) -> Iterator[None]:
    with (directory / LOCK_FILE).open("a") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)


def _fsync_tree(root: Path) -> None:
    for dirpath, _, filenames in os.walk(root):
        for name in filenames:
            fd = os.open(Path(dirpath) / name, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        _fsync_dir(Path(dirpath))


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
