"""The YAML list of datasets, each with its index, that ``ragtiller tune --datasets`` reads.

Example file (relative paths are read from the file's own folder)::

    - dataset: data/cranfield
      index: idx/cranfield
    - dataset: data/squad-dev
      index: idx/squad
      split: questions-1000      # optional: qrels split or questions file stem
      slices: squad-slices.tsv   # optional: query-id -> slice file
      top_k: 10                  # optional: this collection's --top-k
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from ragtiller.errors import EvalError

_KEYS = {"dataset", "index", "split", "slices", "top_k"}


@dataclass(frozen=True)
class DatasetEntry:
    """One entry of the list: a dataset folder, the index built from it, and optionally its
    split, slice file and result depth (``top_k``, instead of the command's ``--top-k``)."""

    dataset: Path
    index: Path
    split: str | None = None
    slices: Path | None = None
    top_k: int | None = None


def read_dataset_list(path: str | Path) -> list[DatasetEntry]:
    """Read the list.

    Raises:
        EvalError: The file is unreadable, not a non-empty YAML list of mappings with
            ``dataset`` and ``index``, or an entry has an unknown key.
    """
    file = Path(path)
    try:
        data = yaml.safe_load(file.read_text("utf-8"))
    except (OSError, yaml.YAMLError) as e:
        raise EvalError(f"dataset list {file}: {e}") from e
    if not isinstance(data, list) or not data:
        raise EvalError(f"dataset list {file}: expected a YAML list of {{dataset, index}} entries")
    root = file.parent
    entries = []
    for n, item in enumerate(data, start=1):
        where = f"dataset list {file}, entry {n}"
        if not isinstance(item, dict) or not {"dataset", "index"} <= item.keys():
            raise EvalError(f"{where}: expected a mapping with 'dataset' and 'index'")
        unknown = sorted(set(map(str, item)) - _KEYS)
        if unknown:
            raise EvalError(f"{where}: unknown key(s) {unknown}; known: {sorted(_KEYS)}")
        top_k = item.pop("top_k", None)
        if top_k is not None and (type(top_k) is not int or top_k <= 0):
            raise EvalError(f"{where}: top_k must be a positive integer, got {top_k!r}")
        if not all(isinstance(v, str) for v in item.values()):
            raise EvalError(f"{where}: dataset, index, split and slices must be strings")
        entries.append(
            DatasetEntry(
                dataset=root / item["dataset"],
                index=root / item["index"],
                split=item.get("split"),
                slices=root / item["slices"] if "slices" in item else None,
                top_k=top_k,
            )
        )
    return entries
