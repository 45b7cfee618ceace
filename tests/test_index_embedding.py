"""Embedders, their identity, and batched embedding with retry, backoff and counted calls."""

from __future__ import annotations

import asyncio
import builtins
import sys
from typing import Any

import numpy as np
import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from ragtiller.core.retry import RetryPolicy
from ragtiller.errors import EmbeddingError
from ragtiller.ingest import build_index
from ragtiller.models import (
    EmbeddingStats,
    HashingEmbedder,
    MiniLMEmbedder,
    embed_texts,
    embedder_identity,
)


class FlakyEmbedder(Embeddings):
    """Fails the first ``failures`` calls, then embeds with a hashing embedder."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls = 0
        self.inner = HashingEmbedder(dim=16)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls += 1
        if self.calls <= self.failures:
            raise ConnectionError(f"quota hiccup {self.calls}")
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        return self.inner.embed_query(text)


class ShapeShifter(Embeddings):
    """Returns whatever ``reply`` says, whatever it is asked."""

    def __init__(self, reply: Any) -> None:
        self.reply = reply

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.reply  # type: ignore[no-any-return]

    def embed_query(self, text: str) -> list[float]:
        return [1.0, 0.0]


def test_hashing_embedder_is_deterministic_normalised_and_lexical() -> None:
    emb = HashingEmbedder(dim=128)
    a, b = np.array(emb.embed_documents(["asyncio gather tasks", "asyncio gather tasks"]))
    assert np.array_equal(a, b)
    assert np.linalg.norm(a) == pytest.approx(1.0, abs=1e-6)
    near = np.array(emb.embed_query("gather the asyncio tasks"))
    far = np.array(emb.embed_query("sqlite cursor rows"))
    assert a @ near > 0.6 > a @ far
    assert emb.embed_query("") == [0.0] * 128


def test_hashing_embedder_async_matches_sync() -> None:
    emb = HashingEmbedder(dim=32)
    assert asyncio.run(emb.aembed_query("x y")) == emb.embed_query("x y")
    assert asyncio.run(emb.aembed_documents(["a", "b"])) == emb.embed_documents(["a", "b"])


def test_identity_uses_attributes_or_probes_the_dimension() -> None:
    assert embedder_identity(HashingEmbedder(dim=48)) == ("ragtiller/hashing-v1-ngram0.25", 48)
    assert embedder_identity(MiniLMEmbedder()) == ("sentence-transformers/all-MiniLM-L6-v2", 384)
    assert embedder_identity(ShapeShifter([[1.0]])) == ("ShapeShifter", 2)


def test_minilm_import_error_carries_the_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    real_import = builtins.__import__

    def no_sentence_transformers(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.startswith("sentence_transformers"):
            raise ImportError("No module named 'sentence_transformers'")
        return real_import(name, *args, **kwargs)

    monkeypatch.delitem(sys.modules, "sentence_transformers", raising=False)
    monkeypatch.setattr(builtins, "__import__", no_sentence_transformers)
    with pytest.raises(
        ImportError, match=r"pip install torch==2\.13\.0 then pip install 'ragtiller\[export\]'"
    ):
        MiniLMEmbedder().embed_query("x")


def test_batches_are_counted_and_rows_normalised() -> None:
    stats = EmbeddingStats()
    texts = [f"text number {i}" for i in range(10)]
    matrix = embed_texts(HashingEmbedder(dim=16), texts, batch_size=4, stats=stats, progress=False)
    assert matrix.shape == (10, 16) and matrix.dtype == np.float32
    assert np.allclose(np.linalg.norm(matrix, axis=1), 1.0, atol=1e-6)
    assert (stats.calls, stats.retries, stats.chunks_embedded) == (3, 0, 10)


def test_flaky_embedder_is_retried_with_growing_jittered_backoff(
    caplog: pytest.LogCaptureFixture,
) -> None:
    flaky = FlakyEmbedder(failures=2)
    delays: list[float] = []
    stats = EmbeddingStats()
    policy = RetryPolicy(attempts=3, base_delay_s=0.5, max_delay_s=5.0)
    matrix = embed_texts(
        flaky, ["a", "b"], retry=policy, stats=stats, progress=False, sleep=delays.append
    )
    assert matrix.shape == (2, 16)
    assert flaky.calls == 3
    assert (stats.calls, stats.retries, stats.chunks_embedded) == (3, 2, 2)
    assert len(delays) == 2
    assert 0.0 <= delays[0] <= 0.5 and 0.0 <= delays[1] <= 1.0  # full jitter under a doubling cap
    assert sum("quota hiccup" in r.getMessage() for r in caplog.records) == 2


def test_always_failing_embedder_raises_embedding_error_after_every_attempt() -> None:
    flaky = FlakyEmbedder(failures=10**6)
    stats = EmbeddingStats()
    with pytest.raises(
        EmbeddingError, match=r"failed on texts 0-1 after 4 attempts: quota hiccup 4"
    ):
        embed_texts(
            flaky,
            ["a", "b"],
            retry=RetryPolicy(attempts=4),
            stats=stats,
            progress=False,
            sleep=lambda _: None,
        )
    assert flaky.calls == stats.calls == 4


def test_build_reports_embedding_stats_through_retries() -> None:
    flaky = FlakyEmbedder(failures=1)
    docs = [Document(page_content=f"document {i}", metadata={"source": f"d{i}"}) for i in range(5)]
    index = build_index(
        docs, embedder=flaky, progress=False, batch_size=2, retry=RetryPolicy(base_delay_s=0.0)
    )
    assert (index.stats.calls, index.stats.retries, index.stats.chunks_embedded) == (4, 1, 5)


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        ([[1.0, 0.0]], r"shape \(1, 2\) for 2 texts"),
        ([[1.0, float("nan")], [0.0, 1.0]], "NaN or infinite"),
        ([["a", "b"], ["c", "d"]], "non-numeric"),
    ],
)
def test_malformed_vectors_are_an_embedding_error(reply: Any, message: str) -> None:
    with pytest.raises(EmbeddingError, match=message):
        embed_texts(ShapeShifter(reply), ["x", "y"], progress=False)


def test_batch_size_must_be_positive() -> None:
    with pytest.raises(ValueError, match="batch_size must be > 0, but got 0"):
        embed_texts(HashingEmbedder(), ["x"], batch_size=0)


def test_progress_bar_shows_only_for_more_than_one_batch(
    capsys: pytest.CaptureFixture[str],
) -> None:
    embed_texts(HashingEmbedder(dim=8), ["a"] * 3, batch_size=4, progress=True)
    assert "embedding" not in capsys.readouterr().err
    embed_texts(HashingEmbedder(dim=8), ["a"] * 9, batch_size=4, progress=True)
    assert "embedding" in capsys.readouterr().err
