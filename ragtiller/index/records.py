"""An immutable, row-aligned table of chunk (or section) records shared by the tiers.

Every tier of one index reads the same table, so a row number means the same chunk in the
vector matrix, the BM25 index and the hits. Mutations (``add_texts``, ``delete`` on the vector
store) build a new table and leave the old one to the tiers still holding it.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from langchain_core.documents import Document

from ragtiller.core.filters import DEFAULT_NAMESPACE as DEFAULT_NAMESPACE  # re-exported
from ragtiller.core.filters import namespace_of as namespace_of  # re-exported
from ragtiller.core.filters import predicate
from ragtiller.core.tiers import Hit
from ragtiller.errors import IndexStoreError

HIT_FIELDS = ("doc_id", "parent_id", "source")
"""Metadata keys lifted out of ``metadata`` into a :class:`~ragtiller.core.tiers.Hit`'s own fields."""


class RecordTable:
    """Ids, texts and metadata of N rows, with a namespace code per row for fast filtering.

    Args:
        ids: Unique row ids.
        texts: One text per row.
        metadatas: One metadata dict per row; ``namespace`` defaults to ``"default"``.

    Raises:
        ValueError: The three sequences differ in length, or an id repeats.
    """

    __slots__ = ("_namespace_codes", "_namespaces", "_row", "ids", "metadatas", "texts")

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
        self.ids: tuple[str, ...] = tuple(ids)
        self.texts: tuple[str, ...] = tuple(texts)
        self.metadatas: tuple[dict[str, Any], ...] = tuple(metadatas)
        self._row = {id_: row for row, id_ in enumerate(self.ids)}
        if len(self._row) != len(self.ids):
            dupes = sorted(i for i, n in Counter(self.ids).items() if n > 1)
            raise ValueError(f"ids must be unique, but these repeat: {dupes[:5]}")
        codes: dict[str, int] = {}
        self._namespace_codes = np.fromiter(
            (codes.setdefault(namespace_of(md), len(codes)) for md in self.metadatas),
            dtype=np.int32,
            count=len(self.metadatas),
        )
        self._namespaces = codes

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def namespaces(self) -> tuple[str, ...]:
        """Distinct namespaces, in order of first appearance."""
        return tuple(self._namespaces)

    def row(self, id_: str) -> int | None:
        """Row number of ``id_``, or None when absent."""
        return self._row.get(id_)

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
        mask: npt.NDArray[np.bool_] | None = None
        if namespaces is not None and not self._namespaces.keys() <= set(namespaces):
            wanted = [self._namespaces[n] for n in namespaces if n in self._namespaces]
            mask = np.isin(self._namespace_codes, np.asarray(wanted, dtype=np.int32))
        if filter:
            test = predicate(filter)
            matches = np.fromiter(
                (test(md) for md in self.metadatas),
                dtype=np.bool_,
                count=len(self.metadatas),
            )
            mask = matches if mask is None else mask & matches
        return mask

    def hit(self, row: int, score: float, **extra: Any) -> Hit:
        """The row as a :class:`~ragtiller.core.tiers.Hit` with ``extra`` added to its metadata."""
        metadata = {k: v for k, v in self.metadatas[row].items() if k not in HIT_FIELDS}
        metadata.update(extra)
        stored = self.metadatas[row]
        return Hit(
            id=self.ids[row],
            text=self.texts[row],
            score=float(score),
            doc_id=str(stored.get("doc_id") or self.ids[row]),
            parent_id=stored.get("parent_id"),
            source=str(stored.get("source", "")),
            metadata=metadata,
        )

    def document(self, row: int) -> Document:
        """The row as a LangChain ``Document`` carrying its id and a copy of its metadata."""
        return Document(
            id=self.ids[row], page_content=self.texts[row], metadata=dict(self.metadatas[row])
        )

    def extend(
        self, ids: Sequence[str], texts: Sequence[str], metadatas: Sequence[dict[str, Any]]
    ) -> RecordTable:
        """A new table with these rows appended."""
        return RecordTable(
            self.ids + tuple(ids), self.texts + tuple(texts), self.metadatas + tuple(metadatas)
        )

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
            for id_, text, md in zip(self.ids, self.texts, self.metadatas, strict=True):
                f.write(json.dumps({"id": id_, "text": text, "metadata": md}, ensure_ascii=False))
                f.write("\n")

    @classmethod
    def load(cls, path: Path) -> RecordTable:
        """Read a table written by :meth:`dump`.

        Raises:
            IndexStoreError: The file is missing or a line is not a record; the message names it.
        """
        ids: list[str] = []
        texts: list[str] = []
        metadatas: list[dict[str, Any]] = []
        shared: dict[str, str] = {}
        try:
            with path.open(encoding="utf-8") as f:
                for lineno, line in enumerate(f, start=1):
                    record = _parse_record(line, path, lineno)
                    ids.append(record["id"])
                    texts.append(record["text"])
                    metadatas.append(_share_strings(record["metadata"], shared))
            return cls(ids, texts, metadatas)
        except FileNotFoundError as e:
            raise IndexStoreError(f"index file {path} is missing") from e
        except (OSError, UnicodeDecodeError, ValueError) as e:
            raise IndexStoreError(f"index file {path} is corrupt: {e}") from e


def _share_strings(metadata: dict[str, Any], shared: dict[str, str]) -> dict[str, Any]:
    """Make equal string values (and strings in list values) one object across rows.

    Chunks of one document repeat its ``doc_id``, ``source``, ``namespace`` and section titles;
    sharing them cuts the loaded table by about a quarter.
    """
    for key, value in metadata.items():
        if isinstance(value, str):
            metadata[key] = shared.setdefault(value, value)
        elif isinstance(value, list):
            metadata[key] = [shared.setdefault(v, v) if isinstance(v, str) else v for v in value]
    return metadata


def _parse_record(line: str, path: Path, lineno: int) -> dict[str, Any]:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as e:
        raise IndexStoreError(
            f"index file {path} is corrupt: line {lineno} is not JSON ({e})"
        ) from e
    if (
        not isinstance(record, dict)
        or not isinstance(record.get("id"), str)
        or not isinstance(record.get("text"), str)
        or not isinstance(record.get("metadata"), dict)
    ):
        raise IndexStoreError(
            f"index file {path} is corrupt: line {lineno} lacks a string id, a string text "
            "or a metadata object"
        )
    return record


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
