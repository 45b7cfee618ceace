"""Ingest is safe on any tree: no link leads the walk out of it, no index is read back in, and
text with a NUL anywhere is skipped as binary, with its reason in the report."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from fixtures.unprivileged import as_unprivileged
from langchain_core.documents import Document

from ragtiller.cli.app import main
from ragtiller.index import open_index
from ragtiller.index.versions import LOCK_FILE, VERSIONS_DIR
from ragtiller.ingest import SkippedSource, ingest, load_sources
from ragtiller.models import HashingEmbedder

SECRET = "hunter2-credential"
EMBEDDER = HashingEmbedder(dim=64)


def reasons(skipped: list[SkippedSource] | tuple[SkippedSource, ...]) -> dict[str, str]:
    return {Path(s.path).name: s.reason for s in skipped}


def every_text(index_dir: Path) -> str:
    """Every chunk, section and corpus-map text the saved index holds (what it can serve)."""
    index = open_index(index_dir)
    parts = [*index.store.records.texts, *index.parents.texts, index.corpus_map]
    return "\n".join(parts)


@pytest.fixture
def linked(tmp_path: Path) -> Path:
    """docs/ with links to files outside it, a chain, a link inside, a loop and a good file."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "credentials.txt").write_text(f"password: {SECRET}\n")
    root = tmp_path / "docs"
    (root / "sub").mkdir(parents=True)
    (root / "index.md").write_text("# Index\n\nThe documentation of the quota ledger.\n")
    (root / "notes.md").symlink_to("../outside/credentials.txt")  # the case
    (root / "abs.md").symlink_to(outside / "credentials.txt")
    (root / "sub" / "hop.md").symlink_to("../notes.md")  # a chain: inside, then out
    (root / "dotdot.md").symlink_to("sub/../../outside/credentials.txt")
    (root / "inside.md").symlink_to("index.md")  # stays in the tree: read
    (root / "loop.md").symlink_to("loop.md")
    return root


def test_no_file_symlink_leads_the_walk_out_of_the_tree(linked: Path) -> None:
    docs, skipped = load_sources([linked])
    assert sorted(d.doc_id for d in docs) == ["index.md", "inside.md"]
    assert all(SECRET not in d.text for d in docs)
    out = "symlink out of the tree (not followed)"
    assert reasons(skipped) == {
        "notes.md": out,
        "abs.md": out,
        "hop.md": out,
        "dotdot.md": out,
        "loop.md": "symlink loop",
    }


def test_a_symlinked_root_is_walked_and_its_links_judged_against_where_it_leads(
    linked: Path, tmp_path: Path
) -> None:
    alias = tmp_path / "alias"
    alias.symlink_to(linked, target_is_directory=True)  # named by the user, like find -H
    docs, skipped = load_sources([alias])
    assert sorted(d.doc_id for d in docs) == ["index.md", "inside.md"]
    assert reasons(skipped)["notes.md"] == "symlink out of the tree (not followed)"


def test_a_link_out_of_the_tree_is_neither_ingested_nor_served(
    linked: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    index_dir = tmp_path / "idx"
    args = ["ingest", str(linked), "--index", str(index_dir), "--embedder", "hashing", "--quiet"]
    assert main(args) == 0
    err = capsys.readouterr().err
    assert f"skipped {linked / 'notes.md'}: symlink out of the tree (not followed)" in err
    assert SECRET not in every_text(index_dir)
    assert (
        main(["ask", "what is the password credential", "--index", str(index_dir), "--json"]) == 0
    )
    assert SECRET not in capsys.readouterr().out


def test_a_file_named_explicitly_is_read_through_its_link(linked: Path) -> None:
    docs, skipped = load_sources([linked / "notes.md"])  # the user chose it, like find -H
    assert [d.doc_id for d in docs] == ["notes.md"] and skipped == []


def test_a_folder_holding_its_own_index_is_ingested_without_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    (root / "a.md").write_text("# A\n\nThe quota ledger counts chat calls.\n")
    index_dir = root / "idx"
    args = ["ingest", str(root), "--index", str(index_dir), "--embedder", "hashing", "--quiet"]
    assert main(args) == 0
    assert "documents: 1 added" in capsys.readouterr().out
    assert (
        main(args) == 0
    )  # the index's corpus_map.txt, chunks.jsonl and parents.jsonl are there now
    out, err = capsys.readouterr()
    assert "documents: 0 added, 0 updated, 1 unchanged" in out and "index unchanged" in out
    assert err == f"skipped {index_dir}: a ragtiller index (not ingested)\n"
    assert open_index(index_dir).manifest.counts.documents == 1


def test_an_index_is_not_read_in_any_state_named_or_walked(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    (root / "a.md").write_text("# A\n\nreal text\n")
    built = ingest([root], root / "idx", embedder=EMBEDDER, progress=False)
    assert built.report is not None and built.report.version == "v000001"
    killed = root / "killed"  # a first save killed after its rename: no CURRENT yet
    (killed / VERSIONS_DIR / "v000001").mkdir(parents=True)
    (killed / LOCK_FILE).touch()
    (killed / VERSIONS_DIR / "v000001" / "corpus_map.txt").write_text("# Map\n\nnot a source\n")
    (root / "map.md").symlink_to("idx/versions/v000001/corpus_map.txt")
    docs, skipped = load_sources([root])
    assert [d.doc_id for d in docs] == ["a.md"]
    assert reasons(skipped) == {
        "idx": "a ragtiller index (not ingested)",
        "killed": "a ragtiller index (not ingested)",
        "map.md": "symlink into a ragtiller index (not followed)",
    }
    corpus_map = root / "idx" / VERSIONS_DIR / "v000001" / "corpus_map.txt"
    docs, skipped = load_sources([corpus_map, root / "idx" / VERSIONS_DIR])
    assert docs == [] and len(skipped) == 2


def test_a_docs_folder_with_a_versions_subfolder_is_still_read(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    (root / "versions").mkdir(parents=True)  # release notes, not an index
    (root / "versions" / "v1.md").write_text("# v1\n\nfirst release\n")
    (root / "manifest.json").write_text("{}")
    (root / "vectors.npy").write_bytes(b"")  # an ML project's files, without chunks.jsonl
    docs, skipped = load_sources([root])
    assert [d.doc_id for d in docs] == ["versions/v1.md"] and skipped == []


def test_a_nul_byte_anywhere_skips_the_file_as_binary(tmp_path: Path) -> None:
    (tmp_path / "early.txt").write_bytes(b"ab\x00cd")
    (tmp_path / "late.txt").write_bytes(b"word " * 2000 + b"\x00 tail")  # after the first 8 KiB
    (tmp_path / "clean.txt").write_text("word " * 2000)
    docs, skipped = load_sources([tmp_path])
    assert [d.doc_id for d in docs] == ["clean.txt"]
    assert reasons(skipped) == {
        "early.txt": "binary: a NUL byte at offset 2",
        "late.txt": "binary: a NUL byte at offset 10000",
    }


def test_nul_characters_in_beir_records_and_documents_are_skipped_too(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    rows = [
        {"_id": "d1", "text": "fine text"},
        {"_id": "d2", "text": "bad \u0000 text"},
        {"_id": "d3", "title": "bad \u0000 title", "text": "x"},
    ]
    corpus.write_text("\n".join(json.dumps(r) for r in rows) + "\nnot json\n")
    docs, skipped = load_sources(
        [
            corpus,
            Document(page_content="clean", metadata={"source": "ok.md"}),
            Document(page_content="one \x00 NUL", metadata={"source": "nul.md"}),
        ]
    )
    assert [d.doc_id for d in docs] == ["d1", "ok.md"]
    assert reasons(skipped) == {
        "corpus.jsonl": "1 line(s) are not BEIR corpus records with _id and text (first: line 4); "
        "2 record(s) are binary: a NUL character (first: line 2)",
        "nul.md": "binary: a NUL character at offset 4",
    }


def test_a_nul_never_reaches_the_index(tmp_path: Path) -> None:
    (tmp_path / "late.md").write_bytes(b"# Late\n\n" + b"text " * 2000 + b"\x00")
    (tmp_path / "good.md").write_text("# Good\n\ntext\n")
    index = ingest([tmp_path], tmp_path.parent / "idx", embedder=EMBEDDER, progress=False)
    assert index.report is not None
    assert [s.reason for s in index.report.skipped] == ["binary: a NUL byte at offset 10008"]
    assert "\x00" not in every_text(tmp_path.parent / "idx")


def test_beir_lines_split_at_newlines_only(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    text = "first part\u2028second part\x85third part"  # JSON allows these unescaped
    corpus.write_text(json.dumps({"_id": "d1", "text": text}, ensure_ascii=False) + "\r\n")
    docs, skipped = load_sources([corpus])
    assert [(d.doc_id, d.text) for d in docs] == [("d1", text)] and skipped == []


def test_an_unreadable_directory_is_reported_not_skipped_silently() -> None:
    with tempfile.TemporaryDirectory() as folder:  # under /tmp, so nobody may enter it
        tree = Path(folder)
        tree.chmod(0o755)
        (tree / "ok.md").write_text("# Ok\n\ntext\n")
        locked = tree / "locked"
        locked.mkdir()
        (locked / "a.md").write_text("# A\n\ntext\n")
        locked.chmod(0)
        try:
            docs, skipped = as_unprivileged(lambda: load_sources([tree]))
        finally:
            locked.chmod(0o755)
    assert [d.doc_id for d in docs] == ["ok.md"]
    assert reasons(skipped) == {"locked": "unreadable directory: Permission denied"}


def test_a_file_swapped_for_a_link_after_the_walk_is_not_followed(linked: Path) -> None:
    target = linked / "index.md"

    def swap(_: int) -> None:  # runs between the walk and the reads
        target.unlink()
        target.symlink_to(linked.parent / "outside" / "credentials.txt")

    docs, skipped = load_sources([linked], on_total=swap)
    assert all(SECRET not in d.text for d in docs)
    assert reasons(skipped)["index.md"] == "became a symlink while ingesting"


def test_a_named_symlink_loop_is_skipped_not_an_error(tmp_path: Path) -> None:
    (tmp_path / "loop.md").symlink_to("loop.md")
    docs, skipped = load_sources([tmp_path / "loop.md"])
    assert docs == [] and reasons(skipped) == {"loop.md": "symlink loop"}
