"""A saved record table read in place: ``chunks.jsonl`` memory-mapped, each line parsed on use.

Holding every chunk's text and metadata as Python objects cost more than the vectors (about
1.9 KB per chunk for 200-word chunks, against 1.5 KB of float32 vectors), and parsing them all
was most of the time an index took to open (1.6 s of 2 s at 100k chunks). A turn reads a few
hundred rows; :class:`JsonlRows` finds the line boundaries with one vectorised scan, parses a
line the first time a row is read, and keeps the last :data:`CACHED_ROWS` parsed rows.
"""

from __future__ import annotations

import functools
import json
import mmap
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Generic, TypeVar, overload

import numpy as np
import numpy.typing as npt
import orjson

from ragtiller.errors import IndexStoreError

T = TypeVar("T")
CACHED_ROWS = 4096
"""Parsed rows kept per table: the rows of a few turns (each reads a few hundred)."""
_SCAN_BYTES = 1 << 26
"""Bytes scanned for line ends at once, so the scan needs little memory beyond the map."""


class JsonlRows:
    """The lines of a JSON-lines record file (``{"id", "text", "metadata"}`` per line), by row.

    The file is memory-mapped (pages shared by every process that opens it); a line is checked
    when it is first parsed, so a corrupt line fails the read that reaches it, naming the file
    and the line.

    Raises:
        IndexStoreError: The file is missing or unreadable.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            with path.open("rb") as f:
                size = path.stat().st_size
                self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else None
        except FileNotFoundError as e:
            raise IndexStoreError(f"index file {path} is missing") from e
        except OSError as e:
            raise IndexStoreError(f"index file {path} is corrupt: {e}") from e
        self._starts, self._ends = _lines(self._map, size)
        if self._map is not None:  # the scan touched every page: a turn needs a few of them
            self._map.madvise(mmap.MADV_DONTNEED)
        self.record = functools.lru_cache(maxsize=CACHED_ROWS)(self._parse)
        """The parsed record of a row (cached)."""

    def __len__(self) -> int:
        return len(self._starts)

    def _parse(self, row: int) -> dict[str, Any]:
        assert self._map is not None
        raw = self._map[int(self._starts[row]) : int(self._ends[row])]
        try:
            record = _loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise IndexStoreError(
                f"index file {self.path} is corrupt: line {row + 1} is not JSON ({e})"
            ) from e
        if (
            not isinstance(record, dict)
            or not isinstance(record.get("id"), str)
            or not isinstance(record.get("text"), str)
            or not isinstance(record.get("metadata"), dict)
        ):
            raise IndexStoreError(
                f"index file {self.path} is corrupt: line {row + 1} lacks a string id, a "
                "string text or a metadata object"
            )
        return record

    def records(self) -> Iterator[dict[str, Any]]:
        """Every record in row order, parsed afresh (the cache is left to the turns)."""
        return (self._parse(row) for row in range(len(self)))


def _loads(raw: bytes) -> Any:
    """One line's JSON: orjson parses a turn's rows about four times faster than ``json``; what
    it refuses and ``json.dumps`` writes (NaN, an integer over 64 bits) falls back to ``json``."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return json.loads(raw.decode("utf-8"))


class Field(Sequence[T], Generic[T]):
    """One field (``id``, ``text`` or ``metadata``) of every row of a :class:`JsonlRows`."""

    def __init__(self, rows: JsonlRows, key: str) -> None:
        self._rows = rows
        self._key = key
        self._count = len(rows)

    def __len__(self) -> int:
        return self._count

    def record(self, row: int) -> dict[str, Any]:
        """The whole parsed record of ``row`` (all of its fields at once)."""
        if not 0 <= row < self._count:
            raise IndexError(f"row {row} out of range")
        return self._rows.record(int(row))

    @overload
    def __getitem__(self, row: int) -> T: ...

    @overload
    def __getitem__(self, row: slice) -> list[T]: ...

    def __getitem__(self, row: int | slice) -> T | list[T]:
        if isinstance(row, slice):
            return [self[r] for r in range(*row.indices(self._count))]
        value: T = self.record(row + self._count if row < 0 else row)[self._key]
        return value

    def __iter__(self) -> Iterator[T]:
        return (record[self._key] for record in self._rows.records())

    def records(self) -> Iterator[dict[str, Any]]:
        """Every whole record, in row order, parsed afresh."""
        return self._rows.records()


def _lines(
    data: mmap.mmap | None, size: int
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Start and end offsets of each non-empty line."""
    if data is None:
        empty = np.empty(0, dtype=np.int64)
        return empty, empty
    ends = [
        np.flatnonzero(
            np.frombuffer(data, dtype=np.uint8, count=min(_SCAN_BYTES, size - at), offset=at) == 10
        )
        + at
        for at in range(0, size, _SCAN_BYTES)
    ]
    newlines = np.concatenate(ends).astype(np.int64)
    starts = np.concatenate([[0], newlines + 1]).astype(np.int64)
    stops = np.concatenate([newlines, [size]]).astype(np.int64)
    keep = stops > starts
    return starts[keep], stops[keep]
