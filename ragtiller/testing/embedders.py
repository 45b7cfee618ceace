"""The embedder contract: what every embedder must do for an index built with it to be searched
(``docs/usage.md``)."""

from __future__ import annotations

import asyncio
import math
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
import pytest
from langchain_core.embeddings import Embeddings

from ragtiller.models import embedder_identity
from ragtiller.testing._fixtures import required

Matrix = npt.NDArray[np.float64]
EmbedderFactory = Callable[[], Embeddings]
"""What ``make_embedder`` returns: a function that makes a new embedder, the same way each time."""

TEXTS: tuple[str, ...] = (
    "How do I cancel an asyncio task?",
    "SQLite cursors fetch rows from a database table.",
    "JSON text is parsed into Python dicts and lists.",
    "résumé, naïve café — Ünïcode and 中文 characters",
    "  Leading and trailing spaces, and UPPER case.  ",
    "x",
    "the boundary layer on a flat plate in hypersonic flow " * 40,  # past 256 wordpieces
)
"""Texts with words, of different lengths, each unlike the others."""
ODD_TEXTS: tuple[str, ...] = (
    "",
    " ",
    "\n\t\r",
    "🙂🚀 ✓",
    "مرحبا بالعالم",
    "a" * 20_000,  # one word longer than any vocabulary entry
    "word " * 5_000,
    "nul \x00 and bell \x07 characters",
)
"""Texts an embedder must survive: the right dimension, finite values, no exception."""


def _matrix(vectors: Sequence[Sequence[float]]) -> Matrix:
    return np.asarray(vectors, dtype=np.float64)


def _cosines(a: Matrix, b: Matrix) -> Matrix:
    """Cosine of every row of ``a`` with every row of ``b``."""
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    return a @ b.T


class EmbedderContract:
    """The embedder contract as pytest tests; subclass it with a ``make_embedder`` fixture."""

    min_batch_cosine: ClassVar[float] = 0.999
    """Least cosine between a text's vectors from different batches (alone, reordered,
    as a query): lower it for a model whose vectors depend a little on their batch."""
    atol: ClassVar[float] = 1e-5
    """Largest difference between two answers to the same call (same batch, same order)."""
    symmetric: ClassVar[bool] = True
    """Whether ``embed_query(t)`` is meant to equal ``embed_documents([t])[0]``."""

    make_embedder = required("make_embedder", "EmbedderContract")

    @pytest.fixture
    def embedder(self, make_embedder: EmbedderFactory) -> Embeddings:
        """One embedder from ``make_embedder``, checked to be LangChain ``Embeddings``."""
        made = make_embedder()
        assert isinstance(made, Embeddings), f"make_embedder returned {type(made).__name__}"
        return made

    @pytest.fixture
    def reference(self, embedder: Embeddings) -> Matrix:
        """``embed_documents(TEXTS)``, the answer the other calls are compared with."""
        return _matrix(embedder.embed_documents(list(TEXTS)))

    def assert_same(self, got: Sequence[Sequence[float]], expected: npt.ArrayLike) -> None:
        """Two answers to the same call: equal to :attr:`atol`."""
        expected = np.asarray(expected, dtype=np.float64)
        assert _matrix(got).shape == expected.shape
        np.testing.assert_allclose(_matrix(got), expected, rtol=0, atol=self.atol)

    def assert_plain_vectors(self, vectors: Any, count: int, dimension: int) -> None:
        """``count`` lists of ``dimension`` finite Python floats, as ``Embeddings`` declares."""
        assert isinstance(vectors, list) and len(vectors) == count, type(vectors).__name__
        for vector in vectors:
            assert isinstance(vector, list), f"a vector is a {type(vector).__name__}, not a list"
            assert len(vector) == dimension, f"{len(vector)} values, not the index's {dimension}"
            assert all(isinstance(x, float) and math.isfinite(x) for x in vector), vector[:8]

    def test_every_vector_has_the_dimension_the_index_records(self, embedder: Embeddings) -> None:
        _, dimension = embedder_identity(embedder)
        assert dimension > 0
        texts = [*TEXTS, *ODD_TEXTS]
        self.assert_plain_vectors(embedder.embed_documents(texts), len(texts), dimension)
        for text in texts:
            self.assert_plain_vectors([embedder.embed_query(text)], 1, dimension)

    def test_a_text_with_words_gets_a_non_zero_vector(self, reference: Matrix) -> None:
        norms = np.linalg.norm(reference, axis=1)
        assert (norms > 0).all(), dict(zip(TEXTS, norms, strict=True))

    def test_an_empty_batch_is_an_empty_list(self, embedder: Embeddings) -> None:
        assert embedder.embed_documents([]) == []
        assert asyncio.run(embedder.aembed_documents([])) == []

    def test_a_batch_keeps_its_order_and_no_text_depends_on_its_neighbours(
        self, embedder: Embeddings, reference: Matrix
    ) -> None:
        singles = _matrix([embedder.embed_documents([t])[0] for t in TEXTS])
        backwards = _matrix(embedder.embed_documents(list(TEXTS[::-1])))[::-1]
        doubled = _matrix(embedder.embed_documents([TEXTS[0], TEXTS[1], TEXTS[0]]))
        alone = _cosines(reference, singles)
        assert (alone.argmax(axis=1) == np.arange(len(TEXTS))).all(), "rows out of order"
        assert alone.diagonal().min() >= self.min_batch_cosine, alone.diagonal()
        reordered = _cosines(reference, backwards).diagonal()
        assert reordered.min() >= self.min_batch_cosine, reordered
        assert _cosines(doubled[:1], doubled[2:])[0, 0] >= self.min_batch_cosine

    def test_the_same_call_answers_the_same(
        self,
        embedder: Embeddings,
        make_embedder: EmbedderFactory,
        reference: Matrix,
    ) -> None:
        self.assert_same(embedder.embed_documents(list(TEXTS)), reference)
        self.assert_same(make_embedder().embed_documents(list(TEXTS)), reference)
        query = embedder.embed_query(TEXTS[0])
        self.assert_same([make_embedder().embed_query(TEXTS[0])], [query])

    def test_threads_at_once_answer_as_one_at_a_time(
        self, embedder: Embeddings, reference: Matrix
    ) -> None:
        queries = [embedder.embed_query(t) for t in TEXTS]
        start = threading.Barrier(4)

        def run(_: int) -> tuple[list[list[float]], list[list[float]]]:
            start.wait()
            return embedder.embed_documents(list(TEXTS)), [embedder.embed_query(t) for t in TEXTS]

        with ThreadPoolExecutor(4) as pool:
            answers = list(pool.map(run, range(4)))
        for documents, answered in answers:
            self.assert_same(documents, reference)
            self.assert_same(answered, queries)

    def test_the_async_twins_answer_as_the_sync_calls(
        self, embedder: Embeddings, reference: Matrix
    ) -> None:
        queries = [embedder.embed_query(t) for t in TEXTS[:3]]

        async def main() -> tuple[list[list[float]], list[list[float]]]:
            documents = await embedder.aembed_documents(list(TEXTS))
            answered = await asyncio.gather(*(embedder.aembed_query(t) for t in TEXTS[:3]))
            return documents, list(answered)

        documents, answered = asyncio.run(main())
        self.assert_same(documents, reference)
        self.assert_same(answered, queries)

    def test_a_query_is_embedded_as_a_document(
        self, embedder: Embeddings, reference: Matrix
    ) -> None:
        if not self.symmetric:
            pytest.skip("symmetric = False: this embedder embeds queries unlike documents")
        queries = _matrix([embedder.embed_query(t) for t in TEXTS])
        agreement = _cosines(queries, reference).diagonal()
        assert agreement.min() >= self.min_batch_cosine, agreement

    def test_a_query_finds_its_own_text_first(
        self, embedder: Embeddings, reference: Matrix
    ) -> None:
        queries = _matrix([embedder.embed_query(t) for t in TEXTS])
        best = _cosines(queries, reference).argmax(axis=1)
        assert [TEXTS[i] for i in best] == list(TEXTS)
