"""Hostile policy input: how long each refusal takes, beside loading a real policy.

Run on demand (not in CI):  python benchmarks/bench_hostile_policy.py [--rounds 5]

Each case is loaded with ``load_policy`` (a path the operator names) or through
``load_allowed_policy`` / ``RunContext(policy=...)`` (what a remote client sends); the figure is the median wall time of
``--rounds`` calls, in milliseconds. POSIX only (a FIFO and ``/dev/zero``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ragtiller import InputError, PolicyError, load_policy
from ragtiller.policies.loader import MAX_POLICY_BYTES, POLICY_DIR_ENV, load_allowed_policy
from ragtiller.policies.run_context import RunContext

SHIPPED = Path(__file__).resolve().parents[1] / "ragtiller/policies/shipped/default.yaml"


def billion_laughs() -> str:
    lines = ['l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, 10)]
    return "\n".join(lines) + "\n"


def files(folder: Path) -> dict[str, Path]:
    """The hostile files (and a real policy) written into ``folder``."""
    made = {
        "default policy, from a file": folder / "copy.yaml",
        "billion laughs (10^9 nodes expanded)": folder / "laughs.yaml",
        "50,000-deep flow nesting": folder / "deep.yaml",
        "200 MB file (sparse)": folder / "huge.yaml",
        "1 MiB + 1 byte file": folder / "over.yaml",
        "1 MiB of comment (read and parsed)": folder / "comment.yaml",
        "300,000-item flat list (0.9 MB)": folder / "flat.yaml",
        "FIFO": folder / "fifo.yaml",
    }
    made["default policy, from a file"].write_text(SHIPPED.read_text("utf-8"), "utf-8")
    made["billion laughs (10^9 nodes expanded)"].write_text(billion_laughs(), "utf-8")
    made["50,000-deep flow nesting"].write_text("x: " + "[" * 50_000 + "]" * 50_000, "utf-8")
    with made["200 MB file (sparse)"].open("wb") as handle:
        handle.truncate(200 * 1024 * 1024)
    made["1 MiB + 1 byte file"].write_bytes(b"#" * (MAX_POLICY_BYTES + 1))
    made["1 MiB of comment (read and parsed)"].write_text("#" * (MAX_POLICY_BYTES - 1) + "\n")
    made["300,000-item flat list (0.9 MB)"].write_text("x: [" + "1, " * 300_000 + "1]\n")
    os.mkfifo(made["FIFO"])
    return made


def median_ms(call: Callable[[], Any], rounds: int) -> tuple[float, str]:
    """Median milliseconds of ``rounds`` calls, and how the last one ended."""
    times, outcome = [], ""
    for _ in range(rounds):
        started = time.perf_counter()
        try:
            call()
            outcome = "loaded"
        except (PolicyError, InputError) as e:
            lines = str(e).splitlines()  # an InputError's first line is "invalid run context:"
            outcome = f"{type(e).__name__}: {lines[1 if isinstance(e, InputError) else 0].strip()}"
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times), outcome


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        cases: dict[str, Callable[[], Any]] = {"shipped default (by name)": load_policy}
        for label, path in files(folder).items():
            cases[label] = lambda path=path: load_policy(path)
        cases["/dev/zero"] = lambda: load_policy("/dev/zero")
        os.environ[POLICY_DIR_ENV] = str(folder)  # what RunContext reads
        cases["per-run 'copy' (operator dir, uncached)"] = lambda: load_allowed_policy(
            "copy", folder
        )
        cases["per-run 'laughs' (operator dir)"] = lambda: load_allowed_policy("laughs", folder)
        cases["RunContext(policy='/etc/passwd')"] = lambda: RunContext(policy="/etc/passwd")
        cases["RunContext(policy='fifo')"] = lambda: RunContext(policy="fifo")
        print(f"median of {args.rounds} calls (ms):")
        for label, call in cases.items():
            ms, outcome = median_ms(call, args.rounds)
            print(f"  {label:40} {ms:8.2f}  {outcome.replace(tmp, '<tmp>')}")


if __name__ == "__main__":
    main()
