"""Ingest through an embedding service: chunks/s against calls in flight.

Run on demand (not in CI; needs ragtiller[pinecone]):

    python benchmarks/bench_embed_service.py                 # 50 ms a call, 1 to 16 in flight
    python benchmarks/bench_embed_service.py --latency-ms 200 --chunks 2000

The service is the loopback emulator of ``tests/fixtures/embedding_service.py`` with a fixed
latency per call (a remote model's compute and network time, the part concurrency hides); the
store is the Pinecone emulator of ``tests/fixtures/pinecone_emulator.py`` reached through the
real ``pinecone`` SDK and langchain-pinecone. Two rows per setting: the driver alone
(``ServiceEmbeddings.embed_documents`` over every text) and the whole path
(``ingest_to_pinecone``: read, chunk, embed, upsert and record each batch). These figures
measure the client, not any real service.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from langchain_pinecone import PineconeVectorStore  # noqa: E402
from pinecone import Pinecone  # noqa: E402

from ragtiller.ingest import SQLiteRecordManager, chunk_sources  # noqa: E402
from ragtiller.models import OpenAICompatibleEmbeddings, ServiceEmbeddings  # noqa: E402
from ragtiller.pinecone.upsert import ingest_to_pinecone  # noqa: E402
from tests.fixtures.embedding_service import API_KEY, MODEL, EmbeddingServiceEmulator  # noqa: E402
from tests.fixtures.pinecone_emulator import API_KEY as PINECONE_KEY  # noqa: E402
from tests.fixtures.pinecone_emulator import PineconeEmulator  # noqa: E402

DIM = 64


def corpus(root: Path, chunks: int) -> Path:
    """``chunks`` one-section documents of distinct text."""
    docs = root / "docs"
    docs.mkdir()
    for i in range(chunks):
        (docs / f"d{i:05d}.md").write_text(f"# Doc {i}\n\nRecord {i} says value {i * 7} holds.\n")
    return docs


def driver(service: EmbeddingServiceEmulator, batch: int, concurrency: int) -> ServiceEmbeddings:
    client = OpenAICompatibleEmbeddings(service.base_url, MODEL, api_key=API_KEY, dimension=DIM)
    return ServiceEmbeddings(client, batch_size=batch, concurrency=concurrency)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=960)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        docs = corpus(Path(tmp), args.chunks)
        texts = [d.page_content for d in chunk_sources([docs])]
        print(
            f"{len(texts)} chunks, {args.batch} texts a call, {args.latency_ms:g} ms a call "
            f"({len(texts) // args.batch + bool(len(texts) % args.batch)} calls)"
        )
        print(f"{'in flight':>9}  {'driver chunks/s':>15}  {'ingest chunks/s':>15}  max seen")
        for concurrency in args.concurrency:
            with (
                EmbeddingServiceEmulator(
                    dimension=DIM, latency_s=args.latency_ms / 1000
                ) as service,
                PineconeEmulator(dimension=DIM) as pinecone,
            ):
                started = time.perf_counter()
                driver(service, args.batch, concurrency).embed_documents(texts)
                alone = len(texts) / (time.perf_counter() - started)
                index = Pinecone(api_key=PINECONE_KEY).Index(host=pinecone.host)
                store = PineconeVectorStore(
                    index=index, embedding=driver(service, args.batch, concurrency), text_key="text"
                )
                records = SQLiteRecordManager("bench", Path(tmp) / f"records-{concurrency}.sqlite")
                started = time.perf_counter()
                ingest_to_pinecone(
                    [docs],
                    store,
                    records,
                    batch_size=args.batch,
                    concurrency=concurrency,
                    progress=False,
                )
                whole = len(texts) / (time.perf_counter() - started)
                assert pinecone.vector_count("default") == len(texts)
                records.close()
                index.close()
                print(f"{concurrency:>9}  {alone:>15.0f}  {whole:>15.0f}  {service.max_in_flight}")


if __name__ == "__main__":
    main()
