"""An immutable, row-aligned table of chunk (or section) records shared by the tiers.

Every tier of one index reads the same table, so a row number means the same chunk in the
vector matrix, the BM25 index and the hits. Mutations (``add_texts``, ``delete`` on the vector
store) build a new table and leave the old one to the tiers still holding it. A table read with
:meth:`RecordTable.load` stays in its file (:mod:`ragtiller.index._lazy_rows`): rows are parsed
when read, and the id lookup, namespace codes and filter columns are built on first use.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from langchain_core.documents import Document

from ragtiller.core.filters import DEFAULT_NAMESPACE as DEFAULT_NAMESPACE  # re-exported
from ragtiller.core.filters import allowed_values, comparable, filter_key
from ragtiller.core.filters import namespace_of as namespace_of  # re-exported
from ragtiller.core.tiers import HIT_FIELDS, Hit
from ragtiller.index._lazy_rows import Field, JsonlRows

_MISSING = object()
MASKS_KEPT = 32
"""Scope masks (namespaces and filter) kept per table: a tenant's mask serves its next turns."""


RECENT_ROWS = 65536
"""Ids of recently built hits whose rows a table remembers (:meth:`RecordTable.rows_in_scope`
finds the rows of a turn's passages by them: the id -> row map of every row costs 0.7 s and
19 MB on first use at 100k chunks)."""


class RecordTable:
    """Ids, texts and metadata of N rows, with a namespace code per row for fast filtering.

    Args:
        ids: Unique row ids.
        texts: One text per row.
        metadatas: One metadata dict per row; ``namespace`` defaults to ``"default"``.

    Raises:
        ValueError: The three sequences differ in length, or an id repeats.
    """

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
        self,
        ids: Sequence[str],
        texts: Sequence[str],
        metadatas: Sequence[dict[str, Any]],
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
        """A table whose rows stay in ``rows``' file; ``namespaces``: the distinct namespaces,
        when known (an index manifest's), so that one namespace needs no pass over the rows."""
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
        """Distinct namespaces, in order of first appearance."""
        return tuple(self._codes()[1])

    def row(self, id_: str) -> int | None:
        """Row number of ``id_``, or None when absent."""
        return self._lookup().get(id_)

    def _lookup(self) -> dict[str, int]:
        """Id -> row, built on first use.

        Raises:
            ValueError: An id repeats.
        """
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
        """Every row's ``metadata[key]`` (a private marker where a row lacks it), kept."""
        values = self._columns.get(key)
        if values is None:
            values = self._columns[key] = tuple(md.get(key, _MISSING) for md in self.metadatas)
        return values

    def mask(
        self,
        namespaces: Sequence[str] | None,
        filter: Mapping[str, Any] | None,
    ) -> npt.NDArray[np.bool_] | None:
        """Rows whose namespace is in ``namespaces`` and whose metadata passes ``filter``.

        Args:
            namespaces: Allowed namespaces; None allows all.
            filter: A portable filter (:mod:`ragtiller.core.filters`: equality, or membership for a
                list); None or empty allows all.

        Returns:
            A boolean row mask, or None when nothing is filtered out.
        """
        try:
            key = (
                None if namespaces is None else tuple(namespaces),
                filter_key(filter),
            )
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
        self,
        ids: Iterable[str],
        namespaces: Sequence[str] | None,
        filter: Mapping[str, Any] | None,
    ) -> tuple[list[str], list[int]]:
        """Those of ``ids`` this table holds in ``namespaces`` and ``filter`` (the scope a search
        sees), with their rows: a tier asked to score chunks never scores one its search could
        not have returned."""
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
        """The row as a :class:`~ragtiller.core.tiers.Hit` with ``extra`` added to its metadata."""
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
        """Every row's id, text and metadata, in row order (one pass over a file)."""
        if isinstance(self.texts, Field):
            return ((r["id"], r["text"], r["metadata"]) for r in self.texts.records())
        return zip(self.ids, self.texts, self.metadatas, strict=True)

    def fields(self, row: int) -> tuple[str, str, dict[str, Any]]:
        """The id, text and metadata of ``row`` (one parse for a table still in its file)."""
        if isinstance(self.texts, Field):
            record = self.texts.record(row)
            return record["id"], record["text"], record["metadata"]
        return self.ids[row], self.texts[row], self.metadatas[row]

    def document(self, row: int) -> Document:
        """The row as a LangChain ``Document`` carrying its id and a copy of its metadata."""
        return Document(
            id=self.ids[row], page_content=self.texts[row], metadata=dict(self.metadatas[row])
        )

    def extend(
        self, ids: Sequence[str], texts: Sequence[str], metadatas: Sequence[dict[str, Any]]
    ) -> RecordTable:
        """A new table with these rows appended."""
        return RecordTable((*self.ids, *ids), (*self.texts, *texts), (*self.metadatas, *metadatas))

    def select(self, rows: npt.NDArray[np.bool_]) -> RecordTable:
        """A new table keeping the rows where ``rows`` is True."""
        keep = np.flatnonzero(rows).tolist()
        return RecordTable(
            [self.ids[r] for r in keep],
            [self.texts[r] for r in keep],
            [self.metadatas[r] for r in keep],
        )

    def dump(self, path: Path) -> None:
        """Write one JSON object per row (``id``, ``text``, ``metadata``) to ``path``."""
        with path.open("w", encoding="utf-8") as f:
            for id_, text, md in self.items():
                f.write(json.dumps({"id": id_, "text": text, "metadata": md}, ensure_ascii=False))
                f.write("\n")

    @classmethod
    def load(cls, path: Path, *, namespaces: Sequence[str] | None = None) -> RecordTable:
        """Open a table written by :meth:`dump` in place: rows are parsed when first read.

        The first and last lines are checked here, every other line when it is first read.

        Args:
            path: The file.
            namespaces: The distinct namespaces of the rows, if known (an index manifest's).

        Raises:
            IndexStoreError: The file is missing, or a line is not a record; the message names
                the file and the line.
        """
        rows = JsonlRows(path)
        if len(rows):
            rows.record(0)
            rows.record(len(rows) - 1)
        return cls._in_file(rows, namespaces)


def ensure_json_metadata(metadata: Mapping[str, Any], *, owner: str) -> dict[str, Any]:
    """Copy ``metadata``, checking that every value survives a JSON round-trip.

    Args:
        metadata: The metadata to store.
        owner: Who it belongs to, for the error message (``document 'a.md'``).

    Raises:
        ValueError: A value is not JSON-serialisable; the message names the key.
    """
    for key, value in metadata.items():
        try:
            json.dumps(value)
        except (TypeError, ValueError) as e:
            raise ValueError(
                f"{owner}: metadata key {key!r} holds a {type(value).__name__}, which is not "
                "JSON-serialisable; convert it to str, number, bool, list or dict"
            ) from e
    return dict(metadata)
