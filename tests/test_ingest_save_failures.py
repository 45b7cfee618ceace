"""Every disk or file-system failure of an ingest exits 3 and names the path; a failed save takes
back what it wrote, so it leaves no space taken and the next ingest is not told "unchanged"."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ragtiller.cli.app import EXIT_INDEX, main
from ragtiller.errors import IndexStoreError
from ragtiller.index import open_index
from ragtiller.index.versions import POINTER_FILE, STAGED_POINTER, VERSIONS_DIR
from ragtiller.ingest import IngestReport, ingest
from ragtiller.models import HashingEmbedder

EMBEDDER = HashingEmbedder(dim=64)


class SimulatedCrash(BaseException):
    """Stands for the process dying: nothing on the way catches it, nothing is cleaned up."""


def write_corpus(root: Path, n: int) -> Path:
    root.mkdir(exist_ok=True)
    for i in range(n):
        (root / f"part{i}.md").write_text(
            f"# Part {i}\n\nThe quota ledger entry {i} records calls.\n"
        )
    return root


def run(corpus: Path, index_dir: Path, **options: object) -> IngestReport:
    index = ingest([corpus], index_dir, embedder=EMBEDDER, progress=False, **options)  # type: ignore[arg-type]
    assert index.report is not None
    return index.report


def listing(index_dir: Path) -> list[str]:
    """Everything under the index directory but the lock: versions, partials, staged pointers."""
    return sorted(str(p.relative_to(index_dir)) for p in index_dir.rglob("*") if p.name != ".lock")


def fail_at(step: str, error: BaseException) -> Callable[[str], None]:
    def hook(name: str) -> None:
        if name == step:
            raise error

    return hook


@pytest.fixture
def indexed(tmp_path: Path) -> tuple[Path, Path]:
    """An index of 3 documents (v000001), and the corpus edited to 5 since."""
    corpus = write_corpus(tmp_path / "docs", 3)
    index_dir = tmp_path / "idx"
    run(corpus, index_dir)
    write_corpus(corpus, 5)
    return corpus, index_dir


def save_steps(corpus: Path, tmp_path: Path) -> list[str]:
    steps: list[str] = []
    template = tmp_path / "steps"
    run(corpus, template, fault=steps.append)
    shutil.rmtree(template)
    return steps


def test_a_disk_full_at_any_step_before_the_switch_leaves_nothing_and_is_retried(
    indexed: tuple[Path, Path], tmp_path: Path
) -> None:
    corpus, index_dir = indexed
    steps = save_steps(corpus, tmp_path)
    before_switch = steps[: steps.index("switch pointer") + 1]
    assert "write vectors.npy" in before_switch and "rename version" in before_switch
    clean = listing(index_dir)
    for step in before_switch:
        full = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))  # no file name, as write() gives
        with pytest.raises(IndexStoreError) as caught:
            run(corpus, index_dir, fault=fail_at(step, full))
        message = str(caught.value)
        assert message.startswith(
            f"cannot save the index at {index_dir}: {step} failed on {index_dir}"
        )
        assert "No space left on device (" in message and "free on its file system)" in message
        assert message.endswith("v000001 is still current, nothing of this save is left"), step
        assert listing(index_dir) == clean, f"a disk full before {step!r} left files behind"
        assert open_index(index_dir).manifest.counts.documents == 3
    report = run(corpus, index_dir)  # not fooled into "unchanged": the edit is saved now
    assert report.version == "v000002" and report.documents.added == 2


def test_a_failure_after_the_switch_says_the_new_version_is_current(
    indexed: tuple[Path, Path],
) -> None:
    corpus, index_dir = indexed
    run(corpus, index_dir)  # v000002
    write_corpus(corpus, 7)
    denied = OSError(
        errno.EACCES, os.strerror(errno.EACCES), str(index_dir / VERSIONS_DIR / "v000001")
    )
    with pytest.raises(IndexStoreError) as caught:
        run(corpus, index_dir, fault=fail_at("remove v000001", denied))
    assert str(caught.value).endswith(
        f"remove v000001 failed on {index_dir / VERSIONS_DIR / 'v000001'}: Permission denied; "
        "v000003 is current"
    )
    assert open_index(index_dir).manifest.counts.documents == 7
    report = run(corpus, index_dir)  # truly unchanged; and the old version is removed now
    assert report.version is None and "index unchanged" in report.summary()
    assert sorted(p.name for p in (index_dir / VERSIONS_DIR).iterdir()) == ["v000002", "v000003"]


def test_ctrl_c_during_a_save_takes_back_what_it_wrote(indexed: tuple[Path, Path]) -> None:
    corpus, index_dir = indexed
    clean = listing(index_dir)
    with pytest.raises(KeyboardInterrupt):
        run(corpus, index_dir, fault=fail_at("write chunks.jsonl", KeyboardInterrupt()))
    assert listing(index_dir) == clean


def test_what_killed_saves_left_is_removed_by_an_ingest_that_changes_nothing(
    indexed: tuple[Path, Path], tmp_path: Path
) -> None:
    corpus, index_dir = indexed
    with contextlib.suppress(SimulatedCrash):  # v000002 renamed into place, never switched to
        run(corpus, index_dir, fault=fail_at("write pointer", SimulatedCrash()))
    other = write_corpus(tmp_path / "other", 4)
    with contextlib.suppress(SimulatedCrash):  # .v000003.partial half written
        run(other, index_dir, fault=fail_at("fsync version", SimulatedCrash()))
    (index_dir / STAGED_POINTER).write_text("v000003\n")  # killed inside the pointer write
    assert sorted(p.name for p in (index_dir / VERSIONS_DIR).iterdir()) == [
        ".v000003.partial",
        "v000001",
        "v000002",
    ]
    for extra in ("part3.md", "part4.md"):
        (corpus / extra).unlink()
    report = run(corpus, index_dir)  # what v000001 holds again
    assert "index unchanged, not rewritten" in report.summary()
    assert (index_dir / POINTER_FILE).read_text() == "v000001\n"
    v1 = index_dir / VERSIONS_DIR / "v000001"
    assert listing(index_dir) == sorted(
        [POINTER_FILE, VERSIONS_DIR, *(str(p.relative_to(index_dir)) for p in [v1, *v1.rglob("*")])]
    )


def test_an_up_to_date_read_only_index_ingests_as_unchanged_without_writing(
    indexed: tuple[Path, Path],
) -> None:
    corpus, index_dir = indexed
    run(corpus, index_dir)
    read_only = OSError(errno.EROFS, os.strerror(errno.EROFS), str(index_dir / ".lock"))
    report = run(corpus, index_dir, fault=fail_at("lock", read_only))  # nothing to save
    assert "index unchanged" in report.summary()
    write_corpus(corpus, 6)
    with pytest.raises(IndexStoreError) as caught:
        run(corpus, index_dir, fault=fail_at("lock", read_only))
    assert str(caught.value) == (
        f"cannot save the index at {index_dir}: lock failed on {index_dir / '.lock'}: "
        "Read-only file system; v000002 is still current, nothing of this save is left"
    )


def test_the_cli_exits_3_naming_the_path(
    indexed: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus, index_dir = indexed
    (index_dir / POINTER_FILE).unlink()
    (index_dir / POINTER_FILE).mkdir()  # CURRENT cannot be replaced by a file now
    code = main(
        ["ingest", str(corpus), "--index", str(index_dir), "--embedder", "hashing", "--quiet"]
    )
    err = capsys.readouterr().err
    assert code == EXIT_INDEX, err
    assert err.startswith(f"ragtiller: error: cannot save the index at {index_dir}: ")
    assert f"failed on {index_dir / POINTER_FILE}" in err and err.count("\n") == 1
    assert not [p for p in (index_dir / VERSIONS_DIR).iterdir() if p.name != "v000001"]


def mount_tmpfs(where: Path, size: str) -> None:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root and mount(8)")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    """A 512 KiB tmpfs: a real file system that fills up (skipped where it cannot be mounted)."""
    where = tmp_path / "disk"
    where.mkdir()
    mount_tmpfs(where, "512k")
    yield where
    subprocess.run(["umount", "-l", str(where)], check=False)


def used(disk: Path) -> int:
    info = os.statvfs(disk)
    return (info.f_blocks - info.f_bfree) * info.f_frsize


def ragtiller_ingest(corpus: Path, index_dir: Path) -> int:
    return main(
        ["ingest", str(corpus), "--index", str(index_dir), "--embedder", "hashing", "--quiet"]
    )


def test_a_real_full_disk_exits_3_names_the_file_and_frees_what_it_took(
    tiny_disk: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    small = write_corpus(tmp_path / "small", 2)
    big = tmp_path / "big"
    big.mkdir()
    (big / "big.md").write_text(" ".join(f"w{i % 5000}x{i}" for i in range(60_000)))
    index_dir = tiny_disk / "idx"
    assert ragtiller_ingest(small, index_dir) == 0
    capsys.readouterr()
    taken = used(tiny_disk)
    for _ in range(2):  # the second run is not told "unchanged": it tries, and fails, again
        assert ragtiller_ingest(big, index_dir) == EXIT_INDEX
        out, err = capsys.readouterr()
        assert out == "" and err.count("\n") == 1
        assert err.startswith(f"ragtiller: error: cannot save the index at {index_dir}: write ")
        assert f"failed on {index_dir / VERSIONS_DIR}/.v000002.partial/" in err
        assert "(0 bytes free on its file system)" in err or "No space left on device" in err
        assert err.rstrip().endswith("v000001 is still current, nothing of this save is left")
        assert used(tiny_disk) == taken
        assert sorted(p.name for p in (index_dir / VERSIONS_DIR).iterdir()) == ["v000001"]
    assert ragtiller_ingest(small, index_dir) == 0
    assert "index unchanged, not rewritten" in capsys.readouterr().out


def test_a_read_only_file_system_exits_3_naming_the_path(
    tiny_disk: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = write_corpus(tmp_path / "docs", 2)
    index_dir = tiny_disk / "idx"
    assert ragtiller_ingest(corpus, index_dir) == 0
    subprocess.run(["mount", "-o", "remount,ro", str(tiny_disk)], check=True)
    assert ragtiller_ingest(corpus, index_dir) == 0  # up to date: nothing to write
    assert "index unchanged" in capsys.readouterr().out
    write_corpus(corpus, 3)
    assert ragtiller_ingest(corpus, index_dir) == EXIT_INDEX
    assert capsys.readouterr().err == (
        f"ragtiller: error: cannot save the index at {index_dir}: lock failed on "
        f"{index_dir / '.lock'}: Read-only file system; v000001 is still current, nothing of "
        "this save is left\n"
    )
    assert ragtiller_ingest(corpus, tiny_disk / "new-index") == EXIT_INDEX
    assert "Read-only file system" in capsys.readouterr().err
