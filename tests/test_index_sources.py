"""The ingest door's intake: files, directories, BEIR JSONL, Documents, skipped files, empty corpora."""

from __future__ import annotations

import json
import logging
import os
import tempfile
from pathlib import Path

import pytest
from fixtures.unprivileged import as_unprivileged
from langchain_core.documents import Document

from ragtiller.core.tiers import SearchRequest
from ragtiller.errors import IngestError
from ragtiller.ingest import build_index, load_sources, sources
from ragtiller.models import HashingEmbedder

EMBEDDER = HashingEmbedder(dim=64)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "guide").mkdir()
    (tmp_path / "guide" / "install.md").write_text("# Install\n\nRun pip install.\n")
    (tmp_path / "guide" / "api.rst").write_text("API\n===\n\nCall ask().\n")
    (tmp_path / "notes.txt").write_text("Plain notes without headings.\n")
    (tmp_path / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    (tmp_path / ".hidden").mkdir()
    (tmp_path / ".hidden" / "secret.md").write_text("# Hidden\n\nnot ingested\n")
    return tmp_path


def test_directories_are_read_recursively_in_sorted_order_with_formats(tree: Path) -> None:
    docs, skipped = load_sources([tree])
    assert [(d.doc_id, d.format) for d in docs] == [
        ("notes.txt", "text"),
        ("guide/api.rst", "rst"),
        ("guide/install.md", "markdown"),
    ]
    assert docs[2].source == "guide/install.md"
    assert skipped == []  # a .png in a directory is not a candidate, so it is not "skipped"


def test_a_named_file_uses_its_name_as_doc_id(tree: Path) -> None:
    docs, _ = load_sources([tree / "guide" / "install.md"])
    assert [d.doc_id for d in docs] == ["install.md"]


def test_binary_and_undecodable_files_are_skipped_with_one_log_record(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "good.md").write_text("# Good\n\ntext\n")
    (tmp_path / "blob.txt").write_bytes(b"abc\x00def")
    (tmp_path / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    with caplog.at_level(logging.INFO, logger="ragtiller.index"):
        index = build_index([tmp_path], embedder=EMBEDDER, progress=False)
    assert [(Path(s.path).name, s.reason) for s in index.report.skipped] == [
        ("blob.txt", "binary: a NUL byte at offset 3"),
        ("latin1.txt", "not UTF-8 text"),
    ]
    warnings = [r for r in caplog.records if r.name == "ragtiller.index"]
    assert len(warnings) == 1
    assert "blob.txt (binary: a NUL byte at offset 3)" in warnings[0].getMessage()
    assert "latin1.txt (not UTF-8 text)" in warnings[0].getMessage()
    assert index.manifest.counts.documents == 1


def test_unreadable_file_is_skipped() -> None:
    with tempfile.TemporaryDirectory() as folder:  # under /tmp, so nobody may enter it
        Path(folder).chmod(0o755)
        locked = Path(folder) / "locked.md"
        locked.write_text("# Locked\n")
        locked.chmod(0)
        reasons = as_unprivileged(lambda: [s.reason for s in load_sources([locked])[1]])
    assert reasons and reasons[0].startswith("unreadable")


def test_unreadable_file_is_skipped_when_reading_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "locked.md"
    target.write_text("# Locked\n")
    real = sources.os.open

    def failing(path: str | os.PathLike[str], flags: int, *args: int) -> int:
        if Path(path).name == "locked.md":
            raise PermissionError(13, "Permission denied")
        return real(path, flags, *args)

    monkeypatch.setattr(sources.os, "open", failing)
    docs, skipped = load_sources([tmp_path])
    assert docs == []
    assert [(Path(s.path).name, s.reason) for s in skipped] == [
        ("locked.md", "unreadable: Permission denied")
    ]


def test_empty_corpus_is_an_ingest_error_naming_what_was_skipped(tmp_path: Path) -> None:
    (tmp_path / "blob.txt").write_bytes(b"\x00\x01")
    (tmp_path / "empty.md").write_text("   \n")
    with pytest.raises(
        IngestError,
        match=r"nothing to ingest: 1 document\(s\) read, none with text; 1 source\(s\) skipped: .*blob.txt \(binary: a NUL byte at offset 0\)",
    ):
        build_index([tmp_path], embedder=EMBEDDER, progress=False)
    with pytest.raises(IngestError, match=r"nothing to ingest: 0 document\(s\) read"):
        build_index([], embedder=EMBEDDER, progress=False)


def test_missing_path_is_an_ingest_error(tmp_path: Path) -> None:
    with pytest.raises(IngestError, match=r"cannot ingest .*nope\.md: no such file"):
        load_sources([tmp_path / "nope.md"])


def test_beir_jsonl_records_become_documents_with_their_ids(tmp_path: Path) -> None:
    lines = [
        {"_id": "d1", "title": "Cats", "text": "Cats purr.", "metadata": {"url": "u1"}},
        {"_id": "d2", "title": "", "text": "Dogs bark."},
        {"_id": "d3", "title": "Title only", "text": ""},
        {"id": "no-underscore-id", "text": "bad"},
    ]
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("\n".join(json.dumps(x) for x in lines) + "\nnot json\n")
    docs, skipped = load_sources([corpus])
    assert [(d.doc_id, d.title, d.text, d.source) for d in docs] == [
        ("d1", "Cats", "Cats purr.", "corpus.jsonl#d1"),
        ("d2", None, "Dogs bark.", "corpus.jsonl#d2"),
        ("d3", None, "Title only", "corpus.jsonl#d3"),
    ]
    assert docs[0].metadata == {"url": "u1"}
    assert (
        skipped[0].reason
        == "2 line(s) are not BEIR corpus records with _id and text (first: line 4)"
    )


def test_beir_hits_carry_the_beir_id_and_title(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    rows = [
        {"_id": "d1", "title": "Zebra", "text": "Striped animals of Africa."},
        {"_id": "d2", "title": "Otter", "text": "Water mammals that float."},
    ]
    corpus.write_text("\n".join(json.dumps(r) for r in rows))
    index = build_index([corpus], embedder=EMBEDDER, progress=False)
    lexical = index.tiers[2]
    hits = lexical.search(SearchRequest(query="zebra", vector=None, k=5))  # the title alone matches
    assert [(h["doc_id"], h["metadata"]["title"]) for h in hits] == [("d1", "Zebra")]


def test_documents_take_id_source_title_namespace_format_and_extra_metadata() -> None:
    docs, _ = load_sources(
        [
            Document(
                page_content="# A\n\nx",
                metadata={"source": "docs/a.md", "title": "A", "status": "designed"},
            ),
            Document(page_content="y", metadata={"id": "k1", "namespace": "api", "format": "rst"}),
            Document(id="lc-id", page_content="z"),
            Document(page_content="no ids at all"),
        ],
        namespace="fallback",
    )
    assert [(d.doc_id, d.source, d.format, d.namespace) for d in docs[:3]] == [
        ("docs/a.md", "docs/a.md", "markdown", "fallback"),
        ("k1", "k1", "rst", "api"),
        ("lc-id", "lc-id", "text", "fallback"),
    ]
    assert docs[0].title == "A" and docs[0].metadata == {"status": "designed"}
    assert docs[3].doc_id.startswith("doc-") and len(docs[3].doc_id) == 16


@pytest.mark.parametrize(
    ("metadata", "message"),
    [
        ({"source": "a", "when": object()}, "metadata key 'when' holds a object"),
        ({"source": "a", "format": "html"}, "format must be one of"),
    ],
)
def test_bad_document_metadata_is_an_ingest_error(
    metadata: dict[str, object], message: str
) -> None:
    with pytest.raises(IngestError, match=message):
        load_sources([Document(page_content="x", metadata=metadata)])
