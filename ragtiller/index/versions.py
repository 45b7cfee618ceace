"""Versioned index directories: a save writes a whole new version, then switches ``CURRENT`` to
it atomically, so an open never sees half a version (docs/index.md, "Saves are versions")."""

from __future__ import annotations

import errno
import fcntl
import os
import re
import shutil
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from ragtiller.errors import IndexStoreError

POINTER_FILE = "CURRENT"
STAGED_POINTER = ".CURRENT.next"
VERSIONS_DIR = "versions"
LOCK_FILE = ".lock"
_VERSION = re.compile(r"v(\d{6,})")
_OPEN_ATTEMPTS = 10

T = TypeVar("T")
FaultHook = Callable[[str], None]  # called with each step of a save before it runs


def is_index_directory(directory: Path) -> bool:
    """Whether ``directory`` holds an index (or a save in progress)."""
    return any((directory / name).exists() for name in (POINTER_FILE, VERSIONS_DIR))


def holds_index(directory: Path) -> bool:
    """Whether ``directory`` is surely an index, not a docs folder that has a ``versions/``."""
    try:
        versions = (directory / VERSIONS_DIR).is_dir()
        if not versions or (directory / LOCK_FILE).is_file():
            return versions
        with (directory / POINTER_FILE).open("rb") as f:
            return _VERSION.fullmatch(f.read(64).decode("ascii", "replace").strip()) is not None
    except OSError:
        return False


def check_writable(directory: Path) -> None:
    """Refuse to save into a file, or into a directory that is not empty and holds no index."""
    try:
        if directory.exists() and not directory.is_dir():
            raise IndexStoreError(
                f"refusing to save into {directory}: it is a file, not a directory"
            )
        if directory.exists() and any(directory.iterdir()) and not is_index_directory(directory):
            raise IndexStoreError(
                f"refusing to save into {directory}: it is not empty and holds no index; "
                "choose an empty or new directory"
            )
    except OSError as e:
        raise IndexStoreError(
            f"cannot save the index at {directory}: it cannot be read: {e.strerror or e}"
        ) from e


def current_version(directory: Path) -> Path:
    if not directory.is_dir():
        raise IndexStoreError(f"no index at {directory}: directory not found")
    try:
        name = (directory / POINTER_FILE).read_text(encoding="utf-8").strip()
    except FileNotFoundError:
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
    """Open the current version, resolving ``CURRENT`` again if a save removed it meanwhile."""
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
    directory: Path, write: Callable[[Path, FaultHook], None], *, fault: FaultHook | None = None
) -> Path:
    """Write a new version with ``write(version_dir, step)`` and make it current; a save that
    fails before the switch removes what it wrote, and says which version is current."""
    check_writable(directory)
    at = _At("mkdir index", directory, fault)
    try:
        at.current = _pointer(directory)  # to say what stays current if the lock cannot be had
        at.step("mkdir index", directory)
        directory.mkdir(parents=True, exist_ok=True)
        at.step("lock", directory / LOCK_FILE)
        with _locked(directory):
            at.current = _pointer(directory)
            return _write_locked(directory, write, at)
    except OSError as e:
        raise IndexStoreError(at.failure(directory, e)) from e


def _write_locked(directory: Path, write: Callable[[Path, FaultHook], None], at: _At) -> Path:
    versions = directory / VERSIONS_DIR
    at.step("mkdir versions", versions)
    versions.mkdir(exist_ok=True)
    _remove_leftovers(directory, at)
    names = (p.name.removeprefix(".").removesuffix(".partial") for p in versions.iterdir())
    name = f"v{max(_numbers(names), default=0) + 1:06d}"
    partial, final = versions / f".{name}.partial", versions / name
    staged = directory / STAGED_POINTER
    previous = at.current
    try:
        at.step("mkdir partial", partial)
        partial.mkdir()
        write(partial, lambda step: at.step(step, partial / step.removeprefix("write ")))
        at.step("fsync version", partial)
        for path in (*partial.rglob("*"), partial):
            _fsync(path)
        at.step("rename version", final)
        partial.rename(final)
        _fsync(versions)
        at.step("write pointer", staged)
        staged.write_text(name + "\n", encoding="utf-8")
        _fsync(staged)
        at.step("switch pointer", directory / POINTER_FILE)
        os.replace(staged, directory / POINTER_FILE)
    except (Exception, KeyboardInterrupt):  # not a crash: take back what this save wrote
        at.free = _free_space(at.path)  # before the removal frees it
        at.leftovers = _remove_paths([partial, final, staged])
        raise
    at.current, at.switched = name, True
    at.step("fsync pointer", directory)
    _fsync(directory)
    # the replaced version stays for readers that resolved CURRENT just before the switch
    _remove_leftovers(directory, at, keep={name, previous})
    return final


@dataclass
class _At:
    name: str
    path: Path
    fault: FaultHook | None = None
    current: str | None = None
    switched: bool = False  # CURRENT names the new version
    free: str | None = None  # space free when the step failed, before the cleanup freed some
    leftovers: list[str] = field(default_factory=list)  # what a failed save could not remove

    def step(self, name: str, path: Path) -> None:
        self.name, self.path = name, path
        if self.fault is not None:
            self.fault(name)

    def failure(self, directory: Path, error: OSError) -> str:
        path = Path(os.fsdecode(error.filename)) if error.filename else self.path
        reason = error.strerror or str(error) or type(error).__name__
        if error.errno in (errno.ENOSPC, errno.EDQUOT, None):
            reason += f" ({self.free or _free_space(path)} free on its file system)"
        still = "" if self.switched else "still "
        state = f"{self.current} is {still}current" if self.current else "no version is current"
        if self.leftovers:
            state += "; could not remove " + ", ".join(self.leftovers)
        elif not self.switched:
            state += ", nothing of this save is left"
        return (
            f"cannot save the index at {directory}: {self.name} failed on {path}: {reason}; {state}"
        )


def _remove_paths(paths: list[Path]) -> list[str]:
    failed: list[str] = []
    for path in paths:
        try:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink(missing_ok=True)
        except OSError as e:
            failed.append(f"{path} ({e.strerror or e})")
    return failed


def _free_space(path: Path) -> str:
    for candidate in (path, *path.parents):
        try:
            info = os.statvfs(candidate)
        except OSError:
            continue
        free = info.f_bavail * info.f_frsize
        return f"{free / 1024 / 1024:.1f} MiB" if free >= 1024 * 1024 else f"{free} bytes"
    return "unknown space"  # pragma: no cover - "/" always answers


def tidy(directory: Path) -> None:
    """Remove what killed saves left and versions older than the one ``CURRENT`` replaced; touch
    nothing if there is nothing to remove (an unchanged index on a read-only disk)."""
    at = _At("tidy", directory)
    versions = directory / VERSIONS_DIR
    try:
        names = [p.name for p in versions.iterdir()] if versions.is_dir() else []
        partials = any(n.endswith(".partial") for n in names)
        if not (directory / STAGED_POINTER).exists() and not partials and len(_numbers(names)) <= 2:
            return
        at.step("lock", directory / LOCK_FILE)
        with _locked(directory):
            at.current = _pointer(directory)
            keep: set[str | None] | None = None
            if at.current is not None and _VERSION.fullmatch(at.current):
                at.switched = True  # nothing is being switched: say which version is current
                numbers = _numbers(p.name for p in versions.iterdir())
                older = [n for n in numbers if n < int(at.current[1:])]
                keep = {at.current, f"v{max(older):06d}" if older else None}
            _remove_leftovers(directory, at, keep=keep)
    except OSError as e:
        raise IndexStoreError(at.failure(directory, e)) from e


def _pointer(directory: Path) -> str | None:
    try:
        return (directory / POINTER_FILE).read_bytes().decode("utf-8", "replace").strip()
    except FileNotFoundError:
        return None


def _remove_leftovers(directory: Path, at: _At, *, keep: set[str | None] | None = None) -> None:
    """Remove what killed saves left (the lock is ours) and, given ``keep``, the other versions."""
    versions = sorted((directory / VERSIONS_DIR).iterdir())
    for path in versions:
        if path.name.endswith(".partial"):
            at.step(f"remove {path.name}", path)
            shutil.rmtree(path)
    staged = directory / STAGED_POINTER
    if staged.exists():
        at.step("remove staged pointer", staged)
        staged.unlink()
    for path in versions:
        if keep is not None and _VERSION.fullmatch(path.name) and path.name not in keep:
            at.step(f"remove {path.name}", path)
            shutil.rmtree(path)


def _numbers(names: Iterable[str]) -> list[int]:
    return [int(m.group(1)) for n in names if (m := _VERSION.fullmatch(n))]


@contextmanager
def _locked(directory: Path) -> Iterator[None]:
    with (directory / LOCK_FILE).open("a") as lock:  # closing it releases the lock
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        yield


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
