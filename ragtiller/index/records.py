"""An immutable, row-aligned table of chunk (or section) records shared by the tiers (a row is the
same chunk in the vectors, the BM25 index and the hits). A loaded table stays in its memory-mapped
file, a line parsed when first read: as Python objects the chunks cost more than the vectors, and
parsing them all was most of an open (1.6 s of 2 s at 100k chunks)."""

from __future__ import annotations

import functools
import json
import mmap
import threading
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Generic, TypeVar, overload

import numpy as np
import numpy.typing as npt
import orjson
from langchain_core.documents import Document

from ragtiller.core.filters import DEFAULT_NAMESPACE as DEFAULT_NAMESPACE  # re-exported
from ragtiller.core.filters import allowed_values, comparable, filter_key
from ragtiller.core.filters import namespace_of as namespace_of  # re-exported
from ragtiller.core.tiers import HIT_FIELDS, Hit
from ragtiller.errors import IndexStoreError

T = TypeVar("T")
_MISSING = object()
MASKS_KEPT = 32  # scope masks kept per table: a tenant's mask serves its next turns
RECENT_ROWS = 65536
"""Ids of recently built hits whose rows a table remembers, so :meth:`RecordTable.rows_in_scope`
finds a turn's passages without the id map of every row (0.7 s and 19 MB at 100k chunks)."""
CACHED_ROWS = 4096  # parsed rows kept per table in a file: the rows of a few turns
_SCAN_BYTES = 1 << 26  # scanned for line ends at once: little memory beyond the map


class RecordTable:
    """Ids (unique), texts and metadata of N rows, with a namespace code per row for fast
    filtering (``namespace`` defaults to ``"default"``)."""

    __slots__ = (
        "_columns",
        "_lock",
        "_masks",
        "_recent",
        "_row",
        "_scopes",
        "ids",
        "metadatas",
        "texts",
    )

    def __init__(
        self, ids: Sequence[str], texts: Sequence[str], metadatas: Sequence[dict[str, Any]]
    ) -> None:
        if not len(ids) == len(texts) == len(metadatas):
            raise ValueError(
                f"ids, texts and metadatas must have one entry per row, but got "
                f"{len(ids)}, {len(texts)} and {len(metadatas)}"
            )
        self.ids: Sequence[str] = tuple(ids)
        self.texts: Sequence[str] = tuple(texts)
        self.metadatas: Sequence[dict[str, Any]] = tuple(metadatas)
        self._row: dict[str, int] | None = None
        self._recent: dict[str, int] = {}
        self._columns: dict[str, tuple[Any, ...]] = {}
        self._masks: dict[Any, npt.NDArray[np.bool_] | None] = {}
        self._scopes: tuple[npt.NDArray[np.int32], dict[str, int]] | None = None
        self._lock = threading.Lock()
        self._lookup()  # ids must be unique

    @classmethod
    def _in_file(cls, rows: JsonlRows, namespaces: Sequence[str] | None) -> RecordTable:
        """A table whose rows stay in ``rows``' file; ``namespaces`` (an index manifest's, when
        known) spares one namespace a pass over the rows."""
        table = cls.__new__(cls)
        table.ids, table.texts = Field(rows, "id"), Field(rows, "text")
        table.metadatas = Field(rows, "metadata")
        table._row, table._recent, table._columns, table._masks = None, {}, {}, {}
        table._scopes, table._lock = None, threading.Lock()
        if namespaces is not None and len(namespaces) == 1:
            table._scopes = (np.zeros(len(rows), dtype=np.int32), {namespaces[0]: 0})
        return table

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def namespaces(self) -> tuple[str, ...]:
        return tuple(self._codes()[1])

    def row(self, id_: str) -> int | None:
        return self._lookup().get(id_)

    def _lookup(self) -> dict[str, int]:
        if self._row is None:
            lookup = {id_: row for row, id_ in enumerate(self.ids)}
            if len(lookup) != len(self):
                dupes = sorted(i for i, n in Counter(self.ids).items() if n > 1)
                raise ValueError(f"ids must be unique, but these repeat: {dupes[:5]}")
            self._row = lookup
        return self._row

    def _codes(self) -> tuple[npt.NDArray[np.int32], dict[str, int]]:
        """A namespace code per row and the code of each namespace, built on first use and
        set as one pair: a search on another thread never sees codes without their names."""
        if self._scopes is None:
            codes: dict[str, int] = {}
            per_row = np.fromiter(
                (codes.setdefault(namespace_of(md), len(codes)) for md in self.metadatas),
                dtype=np.int32,
                count=len(self),
            )
            self._scopes = (per_row, codes)
        return self._scopes

    def column(self, key: str) -> tuple[Any, ...]:
        values = self._columns.get(key)
        if values is None:
            values = self._columns[key] = tuple(md.get(key, _MISSING) for md in self.metadatas)
        return values

    def mask(
        self, namespaces: Sequence[str] | None, filter: Mapping[str, Any] | None
    ) -> npt.NDArray[np.bool_] | None:
        """Rows in ``namespaces`` (None: all) whose metadata passes the portable ``filter``
        (:mod:`ragtiller.core.filters`); None when nothing is filtered out."""
        try:
            key = (None if namespaces is None else tuple(namespaces), filter_key(filter))
            hash(key)
        except TypeError:  # an unhashable value: computed, not kept
            return self._mask(namespaces, filter)
        with self._lock:
            if key in self._masks:
                return self._masks[key]
        mask = self._mask(namespaces, filter)
        with self._lock:
            while len(self._masks) >= MASKS_KEPT:
                self._masks.pop(next(iter(self._masks)))
            self._masks[key] = mask
        return mask

    def _mask(
        self, namespaces: Sequence[str] | None, filter: Mapping[str, Any] | None
    ) -> npt.NDArray[np.bool_] | None:
        mask: npt.NDArray[np.bool_] | None = None
        if namespaces is not None:  # all namespaces need no codes (building them reads every row)
            codes, known = self._codes()
            if not known.keys() <= set(namespaces):
                wanted = [known[n] for n in namespaces if n in known]
                mask = np.isin(codes, np.asarray(wanted, dtype=np.int32))
        for name, expected in (filter or {}).items():  # as ragtiller.core.filters.predicate tests
            values = allowed_values(expected)
            matches = np.fromiter(
                (v is not _MISSING and comparable(v) in values for v in self.column(name)),
                dtype=np.bool_,
                count=len(self),
            )
            mask = matches if mask is None else mask & matches
        if mask is not None:
            mask.flags.writeable = False  # kept and shared by the turns of this scope
        return mask

    def rows_in_scope(
        self, ids: Iterable[str], namespaces: Sequence[str] | None, filter: Mapping[str, Any] | None
    ) -> tuple[list[str], list[int]]:
        """Those of ``ids`` in the scope a search sees, with their rows: a tier asked to score
        chunks never scores one its search could not have returned."""
        mask = self.mask(namespaces, filter)
        found: list[str] = []
        rows: list[int] = []
        for id_ in ids:
            row = self._recent.get(id_)
            row = self.row(id_) if row is None else row
            if row is not None and (mask is None or bool(mask[row])):
                found.append(id_)
                rows.append(row)
        return found, rows

    def hit(self, row: int, score: float, **extra: Any) -> Hit:
        id_, text, stored = self.fields(row)
        if len(self._recent) >= RECENT_ROWS:
            self._recent.clear()
        self._recent[id_] = row  # the rows of a turn's hits, found again without an id map
        metadata = {k: v for k, v in stored.items() if k not in HIT_FIELDS}
        metadata.update(extra)
        return Hit(
            id=id_,
            text=text,
            score=float(score),
            doc_id=str(stored.get("doc_id") or id_),
            parent_id=stored.get("parent_id"),
            source=str(stored.get("source", "")),
            metadata=metadata,
        )

    def items(self) -> Iterator[tuple[str, str, dict[str, Any]]]:
        if isinstance(self.texts, Field):
            return ((r["id"], r["text"], r["metadata"]) for r in self.texts.records())
        return zip(self.ids, self.texts, self.metadatas, strict=True)

    def fields(self, row: int) -> tuple[str, str, dict[str, Any]]:
        if isinstance(self.texts, Field):
            record = self.texts.record(row)
            return record["id"], record["text"], record["metadata"]
        return self.ids[row], self.texts[row], self.metadatas[row]

    def document(self, row: int) -> Document:
        return Document(
            id=self.ids[row], page_content=self.texts[row], metadata=dict(self.metadatas[row])
        )

    def extend(
        self, ids: Sequence[str], texts: Sequence[str], metadatas: Sequence[dict[str, Any]]
    ) -> RecordTable:
        return RecordTable((*self.ids, *ids), (*self.texts, *texts), (*self.metadatas, *metadatas))

    def select(self, rows: npt.NDArray[np.bool_]) -> RecordTable:
        keep = np.flatnonzero(rows).tolist()
        return RecordTable(
            [self.ids[r] for r in keep],
            [self.texts[r] for r in keep],
            [self.metadatas[r] for r in keep],
        )

    def dump(self, path: Path) -> None:
        with path.open("w", encoding="utf-8") as f:
            for id_, text, md in self.items():
                f.write(json.dumps({"id": id_, "text": text, "metadata": md}, ensure_ascii=False))
                f.write("\n")

    @classmethod
    def load(cls, path: Path, *, namespaces: Sequence[str] | None = None) -> RecordTable:
        """Open a table written by :meth:`dump` in place, checking its first and last lines."""
        rows = JsonlRows(path)
        if len(rows):
            rows.record(0)
            rows.record(len(rows) - 1)
        return cls._in_file(rows, namespaces)


def ensure_json_metadata(metadata: Mapping[str, Any], *, owner: str) -> dict[str, Any]:
    """A copy of ``metadata`` whose every value survives a JSON round-trip; else a ValueError
    naming ``owner`` (``document 'a.md'``) and the key."""
    for key, value in metadata.items():
        try:
            json.dumps(value)
        except (TypeError, ValueError) as e:
            raise ValueError(
                f"{owner}: metadata key {key!r} holds a {type(value).__name__}, which is not "
                "JSON-serialisable; convert it to str, number, bool, list or dict"
            ) from e
    return dict(metadata)


class JsonlRows:
    """The lines of a JSON-lines record file (``{"id", "text", "metadata"}`` per line), by row,
    memory-mapped (pages shared by every process that opens it); a corrupt line fails the read
    that reaches it, naming the file and the line."""

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
        return (self._parse(row) for row in range(len(self)))


def _loads(raw: bytes) -> Any:
    """orjson parses a turn's rows four times faster than ``json``, which takes what it refuses
    and ``json.dumps`` writes (NaN, an integer over 64 bits)."""
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
        return self._rows.records()


def _lines(
    data: mmap.mmap | None, size: int
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
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
