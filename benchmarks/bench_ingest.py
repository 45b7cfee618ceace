"""Incremental ingest on the demo corpus: a first ingest vs re-ingesting it unchanged or edited.

Run on demand (not in CI):

    python benchmarks/bench_ingest.py [--embedder hashing minilm] [--repeats 3]

For each embedder, in one process and one temporary directory: the first ingest of the stdlib
demo corpus (``stdlib_documents()``, the demo's chunking) through ``ingest()``, then ``--repeats``
re-ingests of the unchanged corpus, then ``--repeats`` re-ingests with one document edited (a
sentence appended to its end, different each run, so each run has one document to update). Times
are wall-clock seconds of the whole ``ingest()`` call (read, chunk, plan, embed, index, save);
MiniLM's model load is done once before timing. The figures are the median of the repeats, and
the ratio to the first ingest is measured in the same run.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from ragtiller.ingest import IngestReport, ingest, stdlib_documents
from ragtiller.integrations.demo import DEMO_CHUNKING
from ragtiller.models import HashingEmbedder, local_embedder


def timed(docs: list[Document], target: Path, embedder: Embeddings) -> tuple[float, IngestReport]:
    start = time.perf_counter()
    index = ingest(docs, target, embedder=embedder, chunking=DEMO_CHUNKING, progress=False)
    elapsed = time.perf_counter() - start
    assert index.report is not None
    return elapsed, index.report


def edited(docs: list[Document], run: int) -> list[Document]:
    out = list(docs)
    doc = out[0]
    out[0] = Document(
        page_content=doc.page_content + f"\n\nAn added closing sentence, edit {run}.",
        metadata=doc.metadata,
    )
    return out


def bench(name: str, embedder: Embeddings, repeats: int) -> None:
    docs = stdlib_documents()
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp) / "index"
        first, report = timed(docs, target, embedder)
        chunks = report.chunks.added
        print(f"{name}: {len(docs)} documents, {chunks} chunks")
        print(f"  first ingest:     {first:8.2f} s   embedded {report.embedded}")
        unchanged = [timed(docs, target, embedder) for _ in range(repeats)]
        median = statistics.median(t for t, _ in unchanged)
        print(
            f"  unchanged again:  {median:8.2f} s   embedded {unchanged[-1][1].embedded}   "
            f"{median / first:.1%} of the first   ({unchanged[-1][1].summary()})"
        )
        edits = [timed(edited(docs, run), target, embedder) for run in range(1, repeats + 1)]
        median = statistics.median(t for t, _ in edits)
        print(
            f"  one doc edited:   {median:8.2f} s   embedded {edits[-1][1].embedded}   "
            f"{median / first:.1%} of the first   ({edits[-1][1].summary()})"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--embedder", nargs="+", default=["hashing", "minilm"])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    for name in args.embedder:
        embedder: Embeddings = HashingEmbedder() if name == "hashing" else local_embedder()
        if name == "minilm":
            embedder.embed_query("warm up")  # load the model before timing
        bench(name, embedder, args.repeats)


if __name__ == "__main__":
    main()
