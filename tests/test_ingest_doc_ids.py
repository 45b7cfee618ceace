"""Document ids are unique per namespace across files: a clash is refused with both sources named,
and one file's ingest never replaces or deletes another file's records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from langchain_core.documents import Document

from ragtiller.cli.app import EXIT_USAGE, main
from ragtiller.errors import IngestError
from ragtiller.index import open_index
from ragtiller.ingest import ingest, load_sources
from ragtiller.models import HashingEmbedder

EMBEDDER = HashingEmbedder(dim=64)


def corpus(path: Path, *records: tuple[str, str]) -> Path:
    path.write_text("".join(json.dumps({"_id": i, "text": t}) + "\n" for i, t in records))
    return path


def stored(index_dir: Path) -> list[tuple[str, str, str]]:
    records = open_index(index_dir).store.records
    return sorted(
        (md["doc_id"], md["source"], t)
        for t, md in zip(records.texts, records.metadatas, strict=True)
    )


def test_the_same_beir_id_in_two_files_is_refused_naming_both(tmp_path: Path) -> None:
    a = corpus(tmp_path / "a.jsonl", ("1", "alpha record from a"), ("2", "only in a"))
    b = corpus(tmp_path / "b.jsonl", ("1", "beta record from b"))
    with pytest.raises(IngestError) as caught:
        load_sources([a, b])
    assert str(caught.value).startswith(
        "1 document id(s) are given by more than one source, but ids must be unique per "
        f"namespace: '1' (namespace 'default') by {a} line 1 and by {b} line 1; "
    )


def test_an_id_repeated_within_one_corpus_is_refused(tmp_path: Path) -> None:
    a = corpus(tmp_path / "a.jsonl", ("1", "first"), ("2", "other"), ("1", "second"))
    with pytest.raises(
        IngestError, match=rf"'1' \(namespace 'default'\) by {a} line 1 and by {a} line 3"
    ):
        load_sources([a])


def test_two_trees_with_the_same_relative_path_clash(tmp_path: Path) -> None:
    for tree in ("one", "two"):
        (tmp_path / tree).mkdir()
        (tmp_path / tree / "README.md").write_text(f"# Readme\n\nthe {tree} tree\n")
    with pytest.raises(
        IngestError,
        match=r"'README.md' \(namespace 'default'\) by .*one/README.md and by .*two/README.md",
    ):
        load_sources([tmp_path / "one", tmp_path / "two"])


def test_documents_sharing_a_source_are_passages_not_a_clash(tmp_path: Path) -> None:
    docs, _ = load_sources(
        [
            Document(page_content="first passage", metadata={"source": "page.html"}),
            Document(page_content="second passage", metadata={"source": "page.html"}),
        ]
    )
    assert [d.doc_id for d in docs] == ["page.html", "page.html"]
    (tmp_path / "page.html").write_text("a file with the same id")
    with pytest.raises(
        IngestError, match=r"'page.html' .* by LangChain Documents and by .*page.html"
    ):
        load_sources(
            [Document(page_content="x", metadata={"source": "page.html"}), tmp_path / "page.html"]
        )


def test_an_incremental_ingest_never_replaces_a_record_of_another_file(tmp_path: Path) -> None:
    a = corpus(tmp_path / "a.jsonl", ("1", "alpha record from a"))
    b = corpus(tmp_path / "b.jsonl", ("1", "beta record from b"), ("9", "new in b"))
    index_dir = tmp_path / "idx"
    ingest([a], index_dir, embedder=EMBEDDER, progress=False)
    before = stored(index_dir)
    with pytest.raises(IngestError) as caught:
        ingest([b], index_dir, embedder=EMBEDDER, progress=False, cleanup="incremental")
    assert str(caught.value).startswith(
        "1 record id(s) are already indexed from another corpus file, and an incremental "
        "ingest would replace those records: '1' (namespace 'default') is indexed from "
        "a.jsonl#1, and b.jsonl#1 gives it too; "
    )
    assert stored(index_dir) == before == [("1", "a.jsonl#1", "alpha record from a")]


def test_an_incremental_ingest_of_the_same_corpus_updates_its_records(tmp_path: Path) -> None:
    a = corpus(tmp_path / "a.jsonl", ("1", "alpha record from a"))
    c = corpus(tmp_path / "c.jsonl", ("5", "another corpus"))
    index_dir = tmp_path / "idx"
    ingest([a, c], index_dir, embedder=EMBEDDER, progress=False)
    corpus(a, ("1", "alpha record, edited"))
    index = ingest([a], index_dir, embedder=EMBEDDER, progress=False, cleanup="incremental")
    assert index.report is not None and index.report.documents.updated == 1
    assert stored(index_dir) == [
        ("1", "a.jsonl#1", "alpha record, edited"),
        ("5", "c.jsonl#5", "another corpus"),
    ]


def test_a_full_ingest_of_another_file_replaces_the_index(tmp_path: Path) -> None:
    a = corpus(tmp_path / "a.jsonl", ("1", "alpha record from a"))
    b = corpus(tmp_path / "b.jsonl", ("1", "beta record from b"))
    index_dir = tmp_path / "idx"
    ingest([a], index_dir, embedder=EMBEDDER, progress=False)
    ingest([b], index_dir, embedder=EMBEDDER, progress=False)  # full: holds exactly b now
    assert stored(index_dir) == [("1", "b.jsonl#1", "beta record from b")]


def test_the_cli_refuses_a_clash_with_the_usage_exit_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = corpus(tmp_path / "a.jsonl", ("1", "alpha record from a"))
    b = corpus(tmp_path / "b.jsonl", ("1", "beta record from b"))
    index = str(tmp_path / "idx")
    common = ["--index", index, "--embedder", "hashing", "--quiet"]
    assert main(["ingest", str(a), *common]) == 0
    capsys.readouterr()
    assert main(["ingest", str(b), *common, "--cleanup", "incremental"]) == EXIT_USAGE
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("ragtiller: error: 1 record id(s) are already indexed")
    assert main(["ingest", str(a), str(b), *common]) == EXIT_USAGE
    assert "'1' (namespace 'default') by" in capsys.readouterr().err
    assert stored(tmp_path / "idx") == [("1", "a.jsonl#1", "alpha record from a")]
