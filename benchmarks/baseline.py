"""The baseline commit's ``ragtiller`` package, for benchmarks that time it side by side with the
working tree in one run."""

from __future__ import annotations

import subprocess
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def baseline_tree(commit: str, cache: Path) -> Path:
    """The commit's files under ``cache``, extracted once with ``git archive`` (no worktree,
    no checkout); put the returned directory on ``PYTHONPATH`` to import that ragtiller."""
    sha = subprocess.run(
        ["git", "rev-parse", "--short", commit],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    path = cache / f"tree-{sha}"
    if not (path / "ragtiller").is_dir():
        path.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(
            ["git", "archive", "--format=tar", sha, "ragtiller"],
            cwd=ROOT,
            check=True,
            capture_output=True,
        ).stdout
        with tempfile.TemporaryFile() as f:
            f.write(archive)
            f.seek(0)
            with tarfile.open(fileobj=f) as tar:
                tar.extractall(path, filter="data")
    return path
