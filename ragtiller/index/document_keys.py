"""Each chunk row's document, saved at ingest: a turn's document keys without parsing rows.

Rocchio's fused first pass collapses the dense and lexical first passes (100 rows each) to
documents, every turn. In a table still in its file (:mod:`ragtiller.index._lazy_rows`) that
meant parsing each row's JSON line for its ``namespace`` and ``doc_id``: about 110 rows a
turn, 0.5 ms at 100k chunks and 1.6 ms at 1M. :class:`DocumentKeys` holds one code per row
into the distinct ``(namespace, doc_id)`` keys, as :func:`~ragtiller.index.records.row_document_key`
names them, so a turn reads an array instead.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ragtiller.errors import IndexStoreError

DOCUMENT_KEYS_FILE = "document_keys.npz"
"""The saved :class:`DocumentKeys` of a version's chunk table, written at ingest."""


class DocumentKeys:
    """One document code per row, and the key of each code.

    The keys are saved as one JSON array and decoded on first use (the open reads only the
    codes). Equal keys, equal codes; codes number the keys in order of first appearance.

    Args:
        codes: The code of each row.
        encoded: The keys, a UTF-8 JSON array of ``[namespace, doc_id]`` pairs.
        count: How many keys ``encoded`` holds.
    """

    def __init__(self, codes: npt.NDArray[np.int32], encoded: bytes, count: int) -> None:
        self.codes = codes
        self._encoded = encoded
        self._count = count
        self._path: Path | None = None

    def __len__(self) -> int:
        return len(self.codes)

    @classmethod
    def of(cls, keys: Iterable[tuple[str, str]], rows: int) -> DocumentKeys:
        """Built from each row's key, in row order (one pass over the table, at ingest)."""
        known: dict[tuple[str, str], int] = {}
        codes = np.fromiter(
            (known.setdefault(key, len(known)) for key in keys), dtype=np.int32, count=rows
        )
        encoded = json.dumps(list(known), ensure_ascii=False).encode("utf-8")
        return cls(codes, encoded, len(known))

    @functools.cached_property
    def keys(self) -> tuple[tuple[str, str], ...]:
        """The key of each code.

        Raises:
            IndexStoreError: The saved keys are not ``count`` pairs of strings.
        """
        try:
            raw: Any = json.loads(self._encoded.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise self._corrupt(f"the keys are not JSON ({e})") from e
        if not isinstance(raw, list) or len(raw) != self._count:
            raise self._corrupt(f"expected {self._count} keys")
        keys = tuple((pair[0], pair[1]) for pair in raw if _is_key(pair))
        if len(keys) != self._count:
            raise self._corrupt("a key is not a [namespace, doc_id] pair of strings")
        return keys

    def key(self, row: int) -> tuple[str, str]:
        """The document key of ``row``."""
        return self.keys[int(self.codes[row])]

    def save(self, path: Path) -> None:
        """Write the codes and the keys to ``path`` (an ``.npz``, no pickles)."""
        with path.open("wb") as f:
            np.savez(
                f,
                codes=self.codes,
                keys=np.frombuffer(self._encoded, dtype=np.uint8),
                count=np.int64(self._count),
            )

    @classmethod
    def load(cls, path: Path, rows: int) -> DocumentKeys:
        """Read what :meth:`save` wrote for a table of ``rows`` rows, checked (the keys
        themselves when first read).

        Raises:
            IndexStoreError: The file is unreadable or disagrees with the chunk table.
        """
        try:
            with np.load(path, allow_pickle=False) as data:
                codes, encoded, count = data["codes"], data["keys"], data["count"]
        except (OSError, ValueError, KeyError) as e:
            raise IndexStoreError(f"index file {path} is corrupt: {e}") from e
        total = int(count) if count.shape == () and count.dtype.kind == "i" else -1
        if (
            codes.ndim != 1
            or codes.dtype != np.int32
            or len(codes) != rows
            or encoded.dtype != np.uint8
            or total < 0
            or (len(codes) and (codes.min() < 0 or codes.max() >= total))
        ):
            raise IndexStoreError(
                f"index file {path} is corrupt: expected {rows} document codes below the "
                f"number of keys; re-ingest to rebuild it"
            )
        keys = cls(codes, encoded.tobytes(), total)
        keys._path = path
        return keys

    def _corrupt(self, why: str) -> IndexStoreError:
        where = self._path or DOCUMENT_KEYS_FILE
        return IndexStoreError(f"index file {where} is corrupt: {why}; re-ingest to rebuild it")


def _is_key(pair: Any) -> bool:
    return (
        isinstance(pair, list)
        and len(pair) == 2
        and isinstance(pair[0], str)
        and isinstance(pair[1], str)
    )
