"""The corpus map's rows saved at ingest (``corpus_outline.npz``): per namespace, loaded at
open, the same outline as building it from every section, and a scope reads only its own."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from langchain_core.documents import Document

from ragtiller.errors import IndexStoreError
from ragtiller.index import build_corpus_map, open_index
from ragtiller.index.corpus_map import OUTLINE_FILE, OutlineRows
from ragtiller.index.records import RecordTable, namespace_of
from ragtiller.index.units import section_from_record
from ragtiller.index.versions import current_version
from ragtiller.ingest import ingest
from ragtiller.models import HashingEmbedder

EMBEDDER = HashingEmbedder(dim=32)
SPACES = ("ops", "default", "legal")


def corpus() -> list[Document]:
    docs = []
    for i in range(90):
        body = "\n\n".join(
            f"## Step {j}\n\nDo thing {j} of doc {i}. Then more." for j in range(i % 11)
        )
        docs.append(
            Document(
                page_content=f"# Guide {i}\n\nIntro {i}. Second sentence.\n\n{body}",
                metadata={
                    "source": f"d{i}.md",
                    "namespace": SPACES[i % 3],
                    "tenant": "acme" if i % 2 else "globex",
                },
            )
        )
    return docs


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("outline") / "idx"
    ingest(corpus(), directory, embedder=EMBEDDER, progress=False)
    return directory


SCOPES: list[tuple[Sequence[str] | None, dict[str, Any] | None]] = [
    (None, None),
    (["ops"], None),
    (["default", "legal"], None),
    (["ops"], {"tenant": "acme"}),
    (None, {"tenant": "globex"}),
    (["nowhere"], None),
    (["legal"], {"tenant": ["acme", "globex"]}),
]


def expected(parents: RecordTable, namespaces: Sequence[str] | None, filter: Any) -> str:
    """The outline as it was built before: every section of the scope parsed."""
    mask = parents.mask(namespaces, filter)
    rows = range(len(parents)) if mask is None else np.flatnonzero(mask).tolist()
    return build_corpus_map([section_from_record(*parents.fields(r)) for r in rows])


def test_ingest_saves_the_rows_and_open_reads_them(saved: Path) -> None:
    assert (current_version(saved) / OUTLINE_FILE).is_file()
    index = open_index(saved)
    rows = index._derived.outline
    assert rows is not None and set(rows.namespaces) == set(SPACES)
    for namespaces, filter in SCOPES:
        text = index.overview(namespaces, filter)
        assert text == expected(index.parents, namespaces, filter)
    assert index.overview(["ops"], None).startswith("Corpus: 30 documents")
    assert index.overview(None, None) == index.corpus_map  # the whole index, as ingest built it


def test_a_corrupt_file_fails_the_open_naming_it(saved: Path, tmp_path: Path) -> None:
    directory = tmp_path / "idx"
    shutil.copytree(saved, directory)
    path = current_version(directory) / OUTLINE_FILE
    rows = OutlineRows.load(path, len(open_index(saved).parents))
    broken = OutlineRows(rows.namespaces, rows.offsets, rows.rows[::-1] * 0, rows.docs)
    broken.save(path)  # every entry points at section 0
    with pytest.raises(IndexStoreError, match=r"corpus_outline\.npz is corrupt"):
        open_index(directory)
    path.write_bytes(b"not a zip")
    with pytest.raises(IndexStoreError, match=r"corpus_outline\.npz is corrupt"):
        open_index(directory)


class Spy(RecordTable):
    """A section table recording every row whose text or metadata is read."""

    read: set[int]

    @classmethod
    def of(cls, table: RecordTable) -> Spy:
        spy = cls(list(table.ids), list(table.texts), list(table.metadatas))
        spy.read = set()
        spy.metadatas = Recording(spy.metadatas, spy.read)
        return spy

    def fields(self, row: int) -> tuple[str, str, dict[str, Any]]:
        self.read.add(row)
        return super().fields(row)

    def items(self) -> Any:
        raise AssertionError("a scope must not pass over every section")


class Recording(Sequence[dict[str, Any]]):
    def __init__(self, inner: Sequence[dict[str, Any]], read: set[int]) -> None:
        self.inner, self.read = inner, read

    def __len__(self) -> int:
        return len(self.inner)

    def __getitem__(self, row: Any) -> Any:
        assert isinstance(row, int)
        self.read.add(row)
        return self.inner[row]


@pytest.mark.parametrize("namespace", SPACES)
@pytest.mark.parametrize("filter", [None, {"tenant": "acme"}])
def test_a_scope_reads_only_its_own_namespaces_entries(
    saved: Path, namespace: str, filter: dict[str, str] | None
) -> None:
    index = open_index(saved)
    rows = OutlineRows.load(current_version(saved) / OUTLINE_FILE, len(index.parents))
    spy = Spy.of(index.parents)
    text = rows.outline(spy, [namespace], filter)
    assert text == expected(index.parents, [namespace], filter)
    assert spy.read  # it did read sections: those of its own namespace alone
    assert {namespace_of(index.parents.metadatas[r]) for r in spy.read} == {namespace}
    if filter is not None:  # and the text is the tenant's alone
        listed = {index.parents.metadatas[r]["doc_id"] for r in spy.read}
        others = {
            md["doc_id"]
            for md in index.parents.metadatas
            if namespace_of(md) == namespace and md["tenant"] != "acme"
        }
        assert not any(f"- {doc}" in text for doc in others - listed)


def test_rows_of_a_table_group_by_namespace_and_document() -> None:
    table = RecordTable(
        ["s0", "s1", "s2", "s3", "s4"],
        ["a", "b", "c", "d", "e"],
        [
            {"doc_id": "x", "namespace": "n1"},
            {"doc_id": "y", "namespace": "n2"},
            {"doc_id": "x", "namespace": "n1"},
            {"doc_id": "x", "namespace": "n2"},
            {"doc_id": "z"},
        ],
    )
    rows = OutlineRows.of(table)
    assert rows.namespaces == ("n1", "n2", "default")
    assert rows.offsets.tolist() == [0, 2, 4, 5]
    assert rows.rows.tolist() == [0, 2, 1, 3, 4]
    assert rows.docs.tolist() == [0, 0, 1, 0, 2]  # doc x of n2 groups with x, as before
    assert [r.tolist() for r in rows.scope(["n2", "n1"])] == [[0, 1, 2, 3], [0, 1, 0, 0]]
    assert [r.tolist() for r in rows.scope(["none"])] == [[], []]
