"""A loaded record table stays in its file: the same rows, hits and scope masks as in memory."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ragtiller.core.filters import scope_predicate
from ragtiller.errors import IndexStoreError
from ragtiller.index.records import Field, RecordTable


def table() -> RecordTable:
    metadatas: list[dict[str, Any]] = []
    for r in range(300):
        md: dict[str, Any] = {"doc_id": f"d{r // 3}", "namespace": ["default", "api", "x"][r % 3]}
        if r % 5:
            md["tenant"] = "acme" if r % 2 else "globex"
        md["year"] = [2023, 2024, True, 1.0][r % 4]
        md["tags"] = ["a", "b"] if r % 7 == 0 else "a"
        metadatas.append(md)
    return RecordTable(
        [f"c{r}" for r in range(300)], [f"text {r} é" for r in range(300)], metadatas
    )


@pytest.fixture
def saved(tmp_path: Path) -> tuple[RecordTable, RecordTable]:
    built = table()
    built.dump(tmp_path / "chunks.jsonl")
    return built, RecordTable.load(tmp_path / "chunks.jsonl")


def test_the_loaded_rows_are_the_built_ones(saved: tuple[RecordTable, RecordTable]) -> None:
    built, loaded = saved
    assert isinstance(loaded.texts, Field)  # in the file, not copied into Python objects
    assert len(loaded) == 300 and loaded.namespaces == built.namespaces
    assert list(loaded.ids) == list(built.ids) and list(loaded.texts) == list(built.texts)
    assert [loaded.metadatas[r] for r in range(300)] == list(built.metadatas)
    assert loaded.texts[-1] == built.texts[-1] and loaded.ids[10:13] == ["c10", "c11", "c12"]
    assert all(loaded.hit(r, 0.5) == built.hit(r, 0.5) for r in range(0, 300, 7))
    assert loaded.row("c299") == 299 and loaded.row("nope") is None
    with pytest.raises(IndexError):
        loaded.texts[300]


@pytest.mark.parametrize(
    ("namespaces", "filter"),
    [
        (None, None),
        (["default"], None),
        (["api", "x"], {"tenant": "acme"}),
        (None, {"tenant": ["acme", "globex"]}),
        (None, {"year": 1}),  # 1 == True == 1.0, as the portable filter compares
        (["default", "api", "x"], {"year": [2024, 2023], "tenant": "globex"}),
        (None, {"missing": "x"}),
        (["nowhere"], None),
    ],
)
def test_scope_masks_are_the_filters_own_test(
    saved: tuple[RecordTable, RecordTable],
    namespaces: list[str] | None,
    filter: dict[str, Any] | None,
) -> None:
    built, loaded = saved
    test = scope_predicate(namespaces, filter)
    expected = np.array([test(md) for md in built.metadatas])
    for records in (built, loaded):
        mask = records.mask(namespaces, filter)
        got = np.ones(300, dtype=bool) if mask is None else mask
        assert np.array_equal(got, expected)
        assert records.mask(namespaces, filter) is mask  # kept for the scope's next turns
        assert mask is None or not mask.flags.writeable


def test_opening_parses_only_the_first_and_last_lines(tmp_path: Path) -> None:
    table().dump(tmp_path / "chunks.jsonl")
    loaded = RecordTable.load(tmp_path / "chunks.jsonl", namespaces=["default"])
    rows = loaded.texts._rows  # type: ignore[attr-defined]
    assert rows.record.cache_info().currsize == 2
    loaded.hit(150, 1.0)
    assert rows.record.cache_info().currsize == 3


def test_a_scope_of_every_namespace_reads_no_row(tmp_path: Path) -> None:
    # Every namespace allowed needs no namespace codes: building them parses every row, which
    # put a whole chunk file in memory on a store's first unscoped search.
    table().dump(tmp_path / "chunks.jsonl")
    loaded = RecordTable.load(tmp_path / "chunks.jsonl")  # namespaces unknown
    rows = loaded.texts._rows  # type: ignore[attr-defined]
    passes: list[int] = []
    every_row = rows.records
    rows.records = lambda: passes.append(1) or every_row()
    assert loaded.mask(None, None) is None
    assert passes == [] and rows.record.cache_info().currsize == 2  # the lines read at open
    only_api = loaded.mask(["api"], None)
    assert only_api is not None and only_api.sum() == 100
    assert passes == [1]  # a namespace scope reads every row's namespace, once


def test_a_corrupt_line_fails_the_read_that_reaches_it(tmp_path: Path) -> None:
    path = tmp_path / "chunks.jsonl"
    table().dump(path)
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    lines[120] = "garbage\n"
    lines[121] = json.dumps({"id": "x"}) + "\n"
    path.write_text("".join(lines), encoding="utf-8")
    loaded = RecordTable.load(path)
    assert loaded.texts[119] == "text 119 é"
    with pytest.raises(IndexStoreError, match=r"chunks\.jsonl is corrupt: line 121 is not JSON"):
        loaded.texts[120]
    with pytest.raises(IndexStoreError, match=r"line 122 lacks a string id"):
        loaded.hit(121, 1.0)
    with pytest.raises(IndexStoreError, match=r"line 121 is not JSON"):
        loaded.mask(None, {"tenant": "acme"})  # a scan over the rows reaches it too


def test_an_empty_file_is_an_empty_table(tmp_path: Path) -> None:
    (tmp_path / "chunks.jsonl").write_bytes(b"")
    loaded = RecordTable.load(tmp_path / "chunks.jsonl")
    assert len(loaded) == 0 and loaded.namespaces == () and list(loaded.texts) == []
    with pytest.raises(IndexStoreError, match="is missing"):
        RecordTable.load(tmp_path / "absent.jsonl")
