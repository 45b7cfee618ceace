"""Resume after a crash: ``ragtiller ingest --pinecone --embed-url`` killed with SIGKILL mid-run,
then run again, against the loopback embedding service and the loopback Pinecone emulator."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from langchain_core.documents import Document
from langchain_core.indexing import InMemoryRecordManager
from langchain_core.vectorstores import InMemoryVectorStore
from pinecone import Pinecone

from ragtiller.cli.app import EXIT_PROVIDER, EXIT_USAGE, main
from ragtiller.ingest import chunk_sources
from ragtiller.ingest.store_sync import SyncRecord, identity_of, plan_sync, sync_vector_store
from ragtiller.models import HashingEmbedder
from tests.fixtures import embedding_service
from tests.fixtures.embedding_service import MODEL, EmbeddingServiceEmulator
from tests.fixtures.pinecone_emulator import API_KEY, PineconeEmulator

DIM = 32
BATCH, CONCURRENCY, ANSWERED = 3, 3, 4
"""Texts per call, calls in flight, and calls answered before the service stops answering."""


def write_corpus(root: Path) -> Path:
    docs = root / "docs"
    docs.mkdir()
    for d in range(8):
        sections = "\n\n".join(
            f"## Part {s}\n\nDocument {d} part {s}: the {s}-th rule of module {d} is unique."
            for s in range(5)
        )
        (docs / f"doc{d}.md").write_text(f"# Module {d}\n\n{sections}\n")
    return docs


def ingest(root: Path, pinecone: PineconeEmulator, service: EmbeddingServiceEmulator) -> list[str]:
    command = [sys.executable, "-m", "ragtiller", "ingest", "docs", "--pinecone"]
    command += ["--records", "records.sqlite", "--cleanup", "full", "--quiet"]
    command += ["--embed-url", service.base_url, "--embed-model", MODEL]
    command += ["--embed-dimension", str(DIM), "--embed-batch-size", str(BATCH)]
    return [*command, "--embed-concurrency", str(CONCURRENCY)]


def environment(pinecone: PineconeEmulator) -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(sys.path),
        "PINECONE_API_KEY": API_KEY,
        "PINECONE_HOST": pinecone.host,
        "RAGTILLER_EMBED_API_KEY": embedding_service.API_KEY,
    }


def recorded(path: Path) -> int:
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
            return int(db.execute("SELECT count(*) FROM records").fetchone()[0])
    except sqlite3.Error:
        return 0  # not created yet


def wait_for(condition: Callable[[], bool], what: str, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_a_killed_ingest_resumes_without_losing_repeating_or_re_embedding(tmp_path: Path) -> None:
    docs = write_corpus(tmp_path)
    chunks = chunk_sources([docs])
    texts = [c.page_content for c in chunks]
    assert len(set(texts)) == len(texts) > ANSWERED * BATCH + CONCURRENCY * BATCH
    with (
        PineconeEmulator(dimension=DIM) as pinecone,
        EmbeddingServiceEmulator(dimension=DIM) as service,
    ):
        command, env = ingest(tmp_path, pinecone, service), environment(pinecone)
        service.hold_after(ANSWERED)
        child = subprocess.Popen(
            command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        try:
            wait_for(lambda: service.in_flight == CONCURRENCY, "the calls in flight to be held")
            wait_for(
                lambda: recorded(tmp_path / "records.sqlite") == ANSWERED * BATCH,
                "the answered batches to be recorded",
            )
        finally:
            child.send_signal(signal.SIGKILL)
            child.communicate(timeout=60)
        assert child.returncode == -signal.SIGKILL
        before = service.answered_texts()
        in_flight = service.serving_texts()  # sent, never answered: the crash took them
        assert len(before) == ANSWERED * BATCH and len(in_flight) == CONCURRENCY * BATCH
        assert pinecone.vector_count("default") == ANSWERED * BATCH  # written, then recorded
        service.release()

        started = time.monotonic()
        again = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True)
        assert again.returncode == 0, again.stderr
        rest = len(texts) - len(before)
        assert (
            f"chunks: {rest} added, 0 updated, {len(before)} unchanged, 0 deleted" in again.stdout
        )
        after = [t for r in service.requests if r.arrived > started for t in r.texts]
        assert all(r.status == 200 for r in service.requests if r.arrived > started)

        assert not set(before) & set(after)  # nothing embedded and recorded is embedded again
        assert set(in_flight) <= set(after)  # what the crash took is embedded now
        assert Counter(before + after) == Counter(texts)  # every text embedded, once per run
        assert recorded(tmp_path / "records.sqlite") == len(texts)

        index = Pinecone(api_key=API_KEY).Index(host=pinecone.host)
        stored = index.fetch(ids=[str(c.id) for c in chunks], namespace="default").vectors
        assert pinecone.vector_count("default") == len(chunks) == len(stored)  # each chunk once
        expected = HashingEmbedder(dim=DIM).embed_documents(texts)
        for chunk, vector in zip(chunks, expected, strict=True):
            record = stored[str(chunk.id)]
            assert record.metadata["text"] == chunk.page_content
            assert np.allclose(record.values, vector, atol=1e-6)  # its own text's vector
        index.close()


class FailingStore(InMemoryVectorStore):
    """An in-memory store whose ``add_documents`` fails from its ``fail_at``-th call on."""

    def __init__(self, embedder: HashingEmbedder, fail_at: int | None) -> None:
        super().__init__(embedder)
        self.fail_at = fail_at
        self.calls = 0

    def add_documents(self, documents: list[Document], **kwargs: object) -> list[str]:
        self.calls += 1
        if self.fail_at is not None and self.calls >= self.fail_at:
            raise ConnectionError("store went away")
        return super().add_documents(documents, **kwargs)  # type: ignore[arg-type]


class CountingEmbedder(HashingEmbedder):
    def __init__(self) -> None:
        super().__init__(dim=DIM)
        self.texts: list[str] = []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.texts.extend(texts)
        return super().embed_documents(texts)


def test_an_exception_after_k_batches_resumes_from_the_records(tmp_path: Path) -> None:
    docs = write_corpus(tmp_path)
    chunks = chunk_sources([docs])
    embedder = CountingEmbedder()
    store, manager = FailingStore(embedder, fail_at=4), InMemoryRecordManager("t")
    identity = identity_of(embedder.model_name, DIM)
    try:
        sync_vector_store(
            chunks,
            record_manager=manager,
            vector_store=store,
            embedder_identity=identity,
            batch_size=5,
        )
    except ConnectionError:
        pass
    else:
        raise AssertionError("the fourth batch should have failed")
    assert len(manager.list_keys()) == 15 and len(store.store) == 15
    first = list(embedder.texts)
    store.fail_at = None
    result = sync_vector_store(
        chunks,
        record_manager=manager,
        vector_store=store,
        embedder_identity=identity,
        batch_size=5,
        concurrency=3,
    )
    assert (result.chunks.added, result.chunks.unchanged) == (len(chunks) - 15, 15)
    assert Counter(embedder.texts) == Counter(c.page_content for c in chunks)  # both runs
    assert len(first) == 15  # the failed batch was not embedded (the store failed first)
    assert sorted(store.store) == sorted(str(c.id) for c in chunks)
    assert len(manager.list_keys()) == len(chunks)


def test_a_second_key_left_for_one_id_is_retired() -> None:
    """A sync stopped after recording an edited chunk's new key but before forgetting its old one
    leaves two keys for one id; the next sync keeps the current one and retires the other,
    whichever order the record manager lists them in."""
    old, new = SyncRecord("c1", "g", "v1"), SyncRecord("c1", "g", "v2")
    for previous in ([old, new], [new, old]):
        plan = plan_sync([new], previous, "full")
        assert plan.upsert == () and plan.chunks.unchanged == 1
        assert plan.stale == (old,)


def test_the_cli_names_what_the_service_path_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    write_corpus(tmp_path)
    monkeypatch.chdir(tmp_path)
    for name in ("PINECONE_API_KEY", "PINECONE_HOST", "PINECONE_INDEX"):
        monkeypatch.delenv(name, raising=False)
    cases = [
        (["--index", "idx", "--embed-concurrency", "8"], "--embed-concurrency need --embed-url"),
        (["--index", "idx", "--embed-url", "http://127.0.0.1:9/v1"], "needs --embed-model"),
        (["--pinecone"], "--pinecone needs --records FILE"),
        (["--pinecone", "--records", "r.sqlite"], "--pinecone needs PINECONE_API_KEY"),
    ]
    for extra, message in cases:
        assert main(["ingest", "docs", "--quiet", *extra]) == EXIT_USAGE
        assert message in capsys.readouterr().err


def test_a_service_that_keeps_failing_exits_as_a_provider_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    write_corpus(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RAGTILLER_EMBED_API_KEY", embedding_service.API_KEY)
    with EmbeddingServiceEmulator(dimension=DIM) as service:
        service.fail(400, times=100)
        target = ["docs", "--index", str(tmp_path / "idx"), "--quiet", "--embed-url"]
        model = ["--embed-model", MODEL, "--embed-dimension", str(DIM), "--embed-concurrency", "1"]
        code = main(["ingest", *target, service.base_url, *model])
        sent = len(service.requests)
    assert code == EXIT_PROVIDER
    assert sent == 1  # a 400 is not retried, and after it no other batch is sent
    assert "failed on texts 0-31 after 1 attempt" in capsys.readouterr().err
