"""Safe walking: only regular files are read, symlinks only to regular files, a size cap."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ragtiller.cli.app import main
from ragtiller.ingest import SkippedSource, load_sources


@pytest.fixture
def hostile(tmp_path: Path) -> Path:
    root = tmp_path / "docs"
    root.mkdir()
    (root / "good.md").write_text("# Good\n\nReal text.\n")
    os.mkfifo(root / "x.md")  # reading it would block forever
    (root / "zero.md").symlink_to("/dev/zero")  # reading it would never end
    (root / "pipe.md").symlink_to(root / "x.md")  # inside the tree, but a FIFO
    (root / "link.md").symlink_to(root / "good.md")
    (root / "broken.md").symlink_to(root / "missing.md")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "far.md").write_text("# Far\n\nnot under docs\n")
    (root / "linked_dir").symlink_to(outside, target_is_directory=True)
    (root / "big.txt").write_text("word " * 300)
    return root


def reasons(skipped: list[SkippedSource]) -> dict[str, str]:
    return {Path(s.path).name: s.reason for s in skipped}


def test_special_files_and_symlinks_are_skipped_each_once_with_a_reason(hostile: Path) -> None:
    docs, skipped = load_sources([hostile], max_file_bytes=1000)
    assert sorted(d.doc_id for d in docs) == ["good.md", "link.md"]  # a link to a file is read
    assert reasons(skipped) == {
        "x.md": "not a regular file (FIFO)",
        "zero.md": "symlink out of the tree (not followed)",
        "pipe.md": "not a regular file (symlink to FIFO)",
        "broken.md": "broken symlink",
        "linked_dir": "symlink to a directory (not followed)",
        "big.txt": "larger than the 1000 bytes cap (1500 bytes)",
    }
    assert len(skipped) == len({s.path for s in skipped})


def test_a_named_fifo_or_device_link_is_skipped_not_read(hostile: Path) -> None:
    docs, skipped = load_sources(
        [hostile / "x.md", hostile / "zero.md", hostile / "x.md", hostile / "good.md"]
    )
    assert [d.doc_id for d in docs] == ["good.md"]
    assert sorted(reasons(skipped)) == ["x.md", "zero.md"]  # named twice, reported once


def test_a_named_symlinked_directory_is_walked_but_links_inside_it_are_not(
    hostile: Path,
) -> None:
    docs, skipped = load_sources([hostile / "linked_dir"])  # named by the user, like find -H
    assert [d.doc_id for d in docs] == ["far.md"]
    (hostile.parent / "outside" / "back").symlink_to(hostile, target_is_directory=True)
    docs, skipped = load_sources([hostile / "linked_dir"])
    assert [d.doc_id for d in docs] == ["far.md"]  # no loop through "back"
    assert reasons(skipped) == {"back": "symlink to a directory (not followed)"}


def test_max_file_bytes_must_be_positive(hostile: Path) -> None:
    with pytest.raises(ValueError, match="max_file_bytes must be > 0, but got 0"):
        load_sources([hostile], max_file_bytes=0)


def test_cli_reports_each_skip_once_and_takes_a_size_cap(
    hostile: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    index = str(tmp_path / "idx")
    args = ["ingest", str(hostile), "--index", index, "--embedder", "hashing", "--quiet"]
    assert main([*args, "--max-file-mb", "0.001"]) == 0
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert len(lines) == 6 and len(set(lines)) == 6
    assert f"skipped {hostile / 'big.txt'}: larger than the 1048 bytes cap (1500 bytes)" in lines
    assert out.count("\n") == 1 and "6 paths skipped" in out
    assert main(args) == 0  # default cap (64 MiB): big.txt is read now
    out, err = capsys.readouterr()
    assert "big.txt" not in err and "documents: 1 added" in out
    assert main([*args, "--max-file-mb", "0"]) == 2
    assert "--max-file-mb must be > 0" in capsys.readouterr().err
