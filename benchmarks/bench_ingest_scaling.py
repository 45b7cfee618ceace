"""Ingest time against input size: 1, 4 and 16 MB of repeated text and of random words.

Run on demand (not in CI):

    python benchmarks/bench_ingest_scaling.py [--sizes 1 4 16] [--kinds repeated random] [--repeats 3]

Each case is one ``.txt`` file of the given size (MB = 10**6 bytes) in its own temporary
directory, ingested by ``ingest()`` at the default chunking (200/40 words) into a new index
directory. *repeated* is one 40-word paragraph over and over, so every 200-word window is the
same text and every chunk is a repeat (the case whose unique ids used to re-hash from 0 for
each repeat); *random* is words of 3 to 10 random letters from a seeded generator. The embedder
is ``HashingEmbedder`` (a hash of the words, no model), so the figures measure ragtiller's
ingest code (read, chunk, plan, embed, BM25, save), not a model. ``embed s`` is the part of
the ingest spent inside the embedder's ``embed_documents`` (texts repeated within the ingest
are embedded once), ``chunk s`` is ``chunk_documents`` alone on the same text, outside the
ingest. Times are wall-clock seconds, the median of ``--repeats`` runs; ``s/MB`` stays flat as
the size grows if ingest is linear.
"""

from __future__ import annotations

import argparse
import random
import statistics
import string
import tempfile
import time
from pathlib import Path

from ragtiller.index import SourceDocument
from ragtiller.index.units import DEFAULT_CHUNKING
from ragtiller.ingest import ingest
from ragtiller.ingest.chunking import chunk_documents
from ragtiller.models import HashingEmbedder

MB = 10**6


def text_of(kind: str, size: int) -> str:
    """``size`` bytes (ASCII) of repeated or random text."""
    if kind == "repeated":
        paragraph = " ".join(f"ledger{i}" for i in range(40)) + "\n"
        return (paragraph * (size // len(paragraph) + 1))[:size]
    rng = random.Random(size)
    words: list[str] = []
    total = 0
    while total < size:
        word = "".join(rng.choices(string.ascii_lowercase, k=rng.randint(3, 10)))
        words.append(word)
        total += len(word) + 1
    return " ".join(words)[:size]


class TimedHashing(HashingEmbedder):
    """The hashing embedder, adding up the seconds spent in it."""

    def __init__(self) -> None:
        super().__init__()
        self.seconds = 0.0

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        started = time.perf_counter()
        try:
            return super().embed_documents(texts)
        finally:
            self.seconds += time.perf_counter() - started


def one(kind: str, size_mb: int) -> tuple[float, float, float, int]:
    """Seconds of the whole ingest, of its embedding, of chunking alone; the chunk count."""
    text = text_of(kind, size_mb * MB)
    started = time.perf_counter()
    chunk_documents([SourceDocument("doc.txt", text, "doc.txt")], DEFAULT_CHUNKING)
    chunk_s = time.perf_counter() - started
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "docs"
        source.mkdir()
        (source / "doc.txt").write_text(text, encoding="utf-8")
        embedder = TimedHashing()
        started = time.perf_counter()
        index = ingest([source], Path(tmp) / "idx", embedder=embedder, progress=False)
        ingest_s = time.perf_counter() - started
    return ingest_s, embedder.seconds, chunk_s, index.manifest.counts.chunks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 4, 16], help="MB per file")
    parser.add_argument("--kinds", nargs="+", default=["repeated", "random"])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(
        f"{'kind':<9} {'MB':>3} {'chunks':>7} {'ingest s':>9} {'s/MB':>6} {'embed s':>8} {'chunk s':>8}"
    )
    for kind in args.kinds:
        for size in args.sizes:
            runs = [one(kind, size) for _ in range(args.repeats)]
            ingest_s, embed_s, chunk_s = (statistics.median(r[i] for r in runs) for i in range(3))
            print(
                f"{kind:<9} {size:>3} {runs[0][3]:>7} {ingest_s:>9.2f} {ingest_s / size:>6.2f} "
                f"{embed_s:>8.2f} {chunk_s:>8.2f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
