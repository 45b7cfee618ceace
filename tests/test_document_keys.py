"""Each chunk's document saved at ingest (``document_keys.npz``): the same key as parsing the
row, read by a turn without parsing it; a version without the file parses rows, as before."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from langchain_core.documents import Document

from ragtiller.errors import IndexStoreError
from ragtiller.index.document_keys import DOCUMENT_KEYS_FILE, DocumentKeys
from ragtiller.index.opening import open_index
from ragtiller.index.records import RecordTable, row_document_key
from ragtiller.index.versions import current_version
from ragtiller.ingest import ingest
from ragtiller.models import HashingEmbedder
from ragtiller.ranking.documents import doc_key

EMBEDDER = HashingEmbedder(dim=32)


def corpus() -> list[Document]:
    docs = []
    for i in range(40):
        body = "\n\n".join(f"## Step {j}\n\nDo thing {j} of guide {i}." for j in range(i % 6))
        metadata: dict[str, object] = {"source": f"d{i}.md", "tenant": "acme" if i % 2 else "b"}
        if i % 3:
            metadata["namespace"] = "ops" if i % 3 == 1 else "legal"
        docs.append(
            Document(page_content=f"# Guide {i}\n\nIntro {i}.\n\n{body}", metadata=metadata)
        )
    return docs


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("keys") / "idx"
    ingest(corpus(), directory, embedder=EMBEDDER, progress=False)
    return directory


def test_each_saved_key_is_the_rows_own(saved: Path) -> None:
    records = open_index(saved).store.records
    assert records.documents is not None  # attached at open
    parsed = RecordTable.load(current_version(saved) / "chunks.jsonl")  # no codes: the old path
    assert parsed.documents is None
    for row in range(len(records)):
        id_, _, metadata = parsed.fields(row)
        want = row_document_key(id_, metadata)
        assert records.document_key(row) == parsed.document_key(row) == want
        assert want == doc_key(records.hit(row, 0.0))
    assert len(set(records.documents.keys)) == len(records.documents.keys)  # one code per key


def test_keys_with_rows_naming_no_document_or_namespace() -> None:
    metadatas: list[dict[str, object]] = [{}, {"doc_id": "d"}, {"namespace": "n", "doc_id": "d"}]
    table = RecordTable(["a", "b", "c"], ["x", "y", "z"], metadatas)
    want = [table.document_key(r) for r in range(3)]
    assert want == [("", "a"), ("", "d"), ("n", "d")]
    table.attach_documents(table.document_keys())
    assert [table.document_key(r) for r in range(3)] == want
    with pytest.raises(ValueError, match="got 3 document codes for 2 rows"):
        RecordTable(["a", "b"], ["x", "y"], [{}, {}]).attach_documents(table.document_keys())


def test_a_corrupt_file_fails_naming_it(saved: Path, tmp_path: Path) -> None:
    directory = tmp_path / "idx"
    shutil.copytree(saved, directory)
    path = current_version(directory) / DOCUMENT_KEYS_FILE
    rows = len(open_index(saved).store)
    keys = DocumentKeys.load(path, rows)
    DocumentKeys(keys.codes[:-1], b"[]", 0).save(path)  # one code short
    with pytest.raises(IndexStoreError, match=r"document_keys\.npz is corrupt"):
        open_index(directory)
    DocumentKeys(np.full(rows, 5, dtype=np.int32), b"[]", 1).save(path)  # a code past the keys
    with pytest.raises(IndexStoreError, match=r"document_keys\.npz is corrupt"):
        open_index(directory)
    DocumentKeys(np.zeros(rows, dtype=np.int32), b'[["a", 1]]', 1).save(path)
    opened = open_index(directory)  # the keys are decoded on first use, and checked then
    with pytest.raises(IndexStoreError, match=r"document_keys\.npz is corrupt: a key is not"):
        opened.store.records.document_key(0)
    path.write_bytes(b"not a zip")
    with pytest.raises(IndexStoreError, match=r"document_keys\.npz is corrupt"):
        open_index(directory)
