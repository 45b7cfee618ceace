"""Every embedder ragtiller ships runs the public contract of ``ragtiller.testing``, as an
embedder author would run it: the hashing embedder, and the bundled MiniLM on onnxruntime as
``local_embedder()`` gives it (uint8; slow: the export runs once per machine, then is cached).
The fp32 variant runs the same code on another file; tests/test_index_onnx.py compares it."""

from __future__ import annotations

from pathlib import Path

import pytest
from fixtures.contracts import failed_tests

from ragtiller.models import HashingEmbedder, local_embedder
from ragtiller.testing import EmbedderContract, EmbedderFactory


class TestHashingEmbedder(EmbedderContract):
    @pytest.fixture
    def make_embedder(self) -> EmbedderFactory:
        return lambda: HashingEmbedder(dim=64)


@pytest.mark.slow
class TestOnnxMiniLMUint8(EmbedderContract):
    # Dynamic quantization scales activations per batch, so neighbours move a vector a little:
    # measured 0.9792 at least on these texts, the same on every CPU (tests/test_index_onnx.py).
    min_batch_cosine = 0.975

    @pytest.fixture
    def make_embedder(self) -> EmbedderFactory:
        return lambda: local_embedder(runtime="onnx", variant="uint8")


# --- the contract can fail --------------------------------------------------------------------

BROKEN = """
import numpy as np
import pytest
from ragtiller.models import HashingEmbedder
from ragtiller.testing import EmbedderContract


class Backwards(HashingEmbedder):
    # returns a batch in reverse order
    def embed_documents(self, texts):
        return super().embed_documents(texts)[::-1]


class NumpyRows(HashingEmbedder):
    # float32 arrays where LangChain declares lists of floats
    def embed_documents(self, texts):
        return [np.asarray(v, dtype=np.float32) for v in super().embed_documents(texts)]


class TestBackwards(EmbedderContract):
    @pytest.fixture
    def make_embedder(self):
        return lambda: Backwards(dim=64)


class TestNumpyRows(EmbedderContract):
    @pytest.fixture
    def make_embedder(self):
        return lambda: NumpyRows(dim=64)
"""


def test_the_contract_fails_an_embedder_that_breaks_it(tmp_path: Path) -> None:
    failed = failed_tests(tmp_path, BROKEN)
    assert {
        "TestBackwards::test_a_batch_keeps_its_order_and_no_text_depends_on_its_neighbours",
        "TestBackwards::test_a_query_finds_its_own_text_first",
        "TestNumpyRows::test_every_vector_has_the_dimension_the_index_records",
    } <= failed
    assert "TestBackwards::test_every_vector_has_the_dimension_the_index_records" not in failed
    assert "TestNumpyRows::test_a_query_finds_its_own_text_first" not in failed
