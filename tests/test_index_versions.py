"""Versioned saves: readers never fail during a save, and a crash at any step leaves an index."""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from langchain_core.documents import Document

from ragtiller.cli.app import main
from ragtiller.errors import IndexStoreError
from ragtiller.index import EmbeddedIndex, open_index
from ragtiller.index.embedded import INDEX_FILES
from ragtiller.index.versions import POINTER_FILE, VERSIONS_DIR, current_version
from ragtiller.ingest import build_index
from ragtiller.models import HashingEmbedder

EMBEDDER = HashingEmbedder()  # what `ragtiller ask` reopens a hashing index with
ROOT = Path(__file__).resolve().parents[1]


class SimulatedCrash(BaseException):
    """Stands for the process dying: not an Exception, so nothing on the way catches it."""


def build(n: int) -> EmbeddedIndex:
    docs = [
        Document(
            page_content=f"# Part {i}\n\nThe quota ledger entry {i} records chat calls.",
            metadata={"source": f"part{i}.md"},
        )
        for i in range(n)
    ]
    return build_index(docs, embedder=EMBEDDER, progress=False)


@pytest.fixture(scope="module")
def old() -> EmbeddedIndex:
    return build(3)


@pytest.fixture(scope="module")
def new() -> EmbeddedIndex:
    return build(5)


def save_steps(index: EmbeddedIndex, directory: Path) -> list[str]:
    steps: list[str] = []
    index.save(directory, fault=steps.append)
    return steps


def crash_at(step: int) -> Callable[[str], None]:
    seen = 0

    def hook(name: str) -> None:
        nonlocal seen
        if seen == step:
            raise SimulatedCrash(name)
        seen += 1

    return hook


def test_a_save_writes_a_version_and_switches_the_pointer(
    old: EmbeddedIndex, new: EmbeddedIndex, tmp_path: Path
) -> None:
    directory = tmp_path / "idx"
    for i in range(4):
        (old if i % 2 else new).save(directory)
    assert (directory / POINTER_FILE).read_text() == "v000004\n"
    assert sorted(p.name for p in (directory / VERSIONS_DIR).iterdir()) == ["v000003", "v000004"]
    assert sorted(p.name for p in current_version(directory).iterdir()) == sorted(INDEX_FILES)
    assert open_index(directory).manifest.counts.documents == 3


def test_every_step_of_a_save_is_a_fault_point(new: EmbeddedIndex, tmp_path: Path) -> None:
    steps = save_steps(new, tmp_path / "idx")
    for expected in ("mkdir partial", "write vectors.npy", "write manifest.json", "rename version"):
        assert expected in steps
    assert steps.index("write manifest.json") < steps.index("rename version")
    assert steps.index("rename version") < steps.index("switch pointer")


def test_a_crash_at_any_step_leaves_an_index_that_ask_answers_from(
    old: EmbeddedIndex,
    new: EmbeddedIndex,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    template = tmp_path / "template"
    old.save(template)
    old.save(template)  # two versions, so the crash may also hit the removal of the oldest
    steps = [*save_steps(new, tmp_path / "count"), "(none)"]
    seen = {3: 0, 5: 0}
    for step in range(len(steps)):
        directory = tmp_path / f"crash{step}"
        shutil.copytree(template, directory)
        with contextlib.suppress(SimulatedCrash):
            new.save(directory, fault=crash_at(step))
        documents = open_index(directory).manifest.counts.documents
        assert documents in seen, f"crash before {steps[step]!r} left {documents} documents"
        seen[documents] += 1
        assert main(["ask", "what records chat calls", "--index", str(directory)]) == 0, steps[step]
        out = capsys.readouterr().out
        assert "part" in out and "[1] " in out, (
            f"ask found nothing after a crash before {steps[step]!r}"
        )
    assert seen[3] and seen[5]  # both outcomes happen: the switch is the dividing line
    assert steps.index("switch pointer") == seen[3] - 1


def test_the_next_save_removes_partial_versions(
    old: EmbeddedIndex, new: EmbeddedIndex, tmp_path: Path
) -> None:
    directory = tmp_path / "idx"
    old.save(directory)
    steps = save_steps(new, tmp_path / "count")
    with contextlib.suppress(SimulatedCrash):
        new.save(directory, fault=crash_at(steps.index("rename version")))
    leftovers = [
        p.name for p in (directory / VERSIONS_DIR).iterdir() if p.name.endswith(".partial")
    ]
    assert leftovers == [".v000002.partial"]
    new.save(directory)
    names = sorted(p.name for p in (directory / VERSIONS_DIR).iterdir())
    assert names == ["v000001", "v000002"]
    assert open_index(directory).manifest.counts.documents == 5


def test_a_first_save_that_crashed_is_no_index_and_the_next_one_is(
    new: EmbeddedIndex, tmp_path: Path
) -> None:
    directory = tmp_path / "idx"
    with contextlib.suppress(SimulatedCrash):
        new.save(directory, fault=crash_at(5))
    with pytest.raises(IndexStoreError, match=r"CURRENT not found"):
        open_index(directory)
    new.save(directory)
    assert open_index(directory).manifest.counts.documents == 5


SAVER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from langchain_core.documents import Document
    from ragtiller.ingest import build_index
    from ragtiller.models import HashingEmbedder

    def build(n):
        docs = [Document(page_content=f"# Part {i}\\n\\nThe quota ledger entry {i} records chat calls.",
                         metadata={"source": f"part{i}.md"}) for i in range(n)]
        return build_index(docs, embedder=HashingEmbedder(), progress=False)

    target, saves, pause = Path(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    indexes = [build(3), build(5)]
    print("ready", flush=True)
    for i in range(saves):
        indexes[i % 2].save(target)
        print(i, flush=True)
        time.sleep(pause)
    """
)


def saver(directory: Path, saves: int, pause_s: float = 0.0) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    process = subprocess.Popen(
        [sys.executable, "-c", SAVER, str(directory), str(saves), str(pause_s)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "ready"
    return process


def test_200_opens_interleaved_with_50_saves_never_fail(old: EmbeddedIndex, tmp_path: Path) -> None:
    directory = tmp_path / "idx"
    old.save(directory)
    process = saver(directory, 50, pause_s=0.02)  # >= 1 s of saving, however fast the disk
    opens, failures, during, seen = 0, [], 0, []
    while opens < 200 or process.poll() is None:
        saving = process.poll() is None
        try:
            seen.append(EmbeddedIndex.load(directory, embedder=EMBEDDER).manifest.counts.documents)
        except IndexStoreError as e:
            failures.append(str(e))
        opens += 1
        during += saving
    process.communicate(timeout=60)
    assert process.returncode == 0
    assert failures == []
    assert opens >= 200
    assert during >= 50, f"only {during} opens overlapped the saves"
    switches = sum(1 for a, b in itertools.pairwise(seen) if a != b)
    assert switches >= 5, "the opens did not see the saves switch versions"


@pytest.mark.slow
def test_a_killed_saver_always_leaves_an_index(old: EmbeddedIndex, tmp_path: Path) -> None:
    directory = tmp_path / "idx"
    old.save(directory)
    for delay in (0.05, 0.13, 0.29):
        process = saver(directory, 1000)
        time.sleep(delay)
        process.send_signal(signal.SIGKILL)
        process.communicate(timeout=30)
        assert open_index(directory).manifest.counts.documents in (3, 5)
    old.save(directory)
    assert not [p for p in (directory / VERSIONS_DIR).iterdir() if p.name.endswith(".partial")]


def test_the_demo_rebuilds_a_cache_whose_first_save_was_interrupted(tmp_path: Path) -> None:
    from ragtiller.integrations.demo import demo_index

    logs: list[str] = []
    demo_index(EMBEDDER, cache_dir=tmp_path, log=logs.append)
    (cached,) = tmp_path.iterdir()
    (cached / POINTER_FILE).unlink()  # as if the first save died before the switch
    index = demo_index(EMBEDDER, cache_dir=tmp_path, log=logs.append)
    (unusable,) = [line for line in logs if "unusable" in line]
    assert "CURRENT not found" in unusable
    assert index.manifest.counts.chunks > 1000
    assert demo_index(EMBEDDER, cache_dir=tmp_path, log=logs.append).manifest == index.manifest
    assert logs[-1].startswith("using the cached demo index")
