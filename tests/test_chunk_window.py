"""Chunks cut to the embedder's input window (``chunking.window: embedder``; default ``words``).

MiniLM reads 256 wordpieces of a text ([CLS] and [SEP] included) and drops the rest. A chunk
of 200 words of technical prose with its title header can hold more; with ``embedder`` ingest
bounds each chunk's indexed text by the embedder's own tokenizer as well as by
``chunk_tokens`` words, so no word is searchable by BM25 yet cut off the vector.
"""

from __future__ import annotations

import pytest
from langchain_core.documents import Document

from ragtiller.index import ChunkingConfig
from ragtiller.index.lexical import indexed_text
from ragtiller.ingest import build_index, chunk_documents
from ragtiller.ingest.chunking import Bound, ModelWindow, token_windows
from ragtiller.ingest.sources import SourceDocument
from ragtiller.models import HashingEmbedder, local_embedder
from ragtiller.models.onnx_model import OnnxMiniLMEmbedder

pytestmark = pytest.mark.slow

# 160 words, many wordpieces each: within 200 words, far past 254 wordpieces.
DENSE_PROSE = " ".join(
    f"Thermoelastic{i} eigenfrequencies (Reynolds-averaged, k-omega SST) at Re=3.2e{i % 7}."
    for i in range(20)
)
TITLE = "Hypersonic boundary-layer transition: direct numerical simulations"


@pytest.fixture(scope="module")
def embedder() -> OnnxMiniLMEmbedder:
    model = local_embedder()
    assert isinstance(model, OnnxMiniLMEmbedder)
    return model


def doc(text: str) -> SourceDocument:
    return SourceDocument(doc_id="p.md", text=text, source="p.md", title=TITLE)


def test_every_chunk_of_dense_prose_fits_the_window_and_every_word_is_kept(
    embedder: OnnxMiniLMEmbedder,
) -> None:
    config = ChunkingConfig()
    assert config.window == "words"
    assert len(DENSE_PROSE.split()) <= config.chunk_tokens  # words alone: one chunk
    _, whole = chunk_documents([doc(DENSE_PROSE)], config, ModelWindow.of(embedder))
    assert len(whole) == 1
    first = indexed_text(whole[0].text, {"title": TITLE})
    assert embedder.count_tokens([first])[0] > embedder.input_window  # MiniLM would cut it

    fitted = ChunkingConfig(window="embedder")
    _, chunks = chunk_documents([doc(DENSE_PROSE)], fitted, ModelWindow.of(embedder))
    assert len(chunks) > 1
    sizes = embedder.count_tokens([indexed_text(c.text, {"title": TITLE}) for c in chunks])
    assert max(sizes) <= embedder.input_window
    covered = " ".join(c.text for c in chunks).split()
    assert set(DENSE_PROSE.split()) <= set(covered)  # nothing dropped (pieces overlap)


def test_plain_prose_within_the_window_is_cut_exactly_as_by_words(
    embedder: OnnxMiniLMEmbedder,
) -> None:
    text = "\n\n".join(f"Paragraph {i} says plain things about wings." for i in range(6))
    by_words = chunk_documents([doc(text)], ChunkingConfig(window="words"))[1]
    window = ModelWindow.of(embedder)
    fitted = chunk_documents([doc(text)], ChunkingConfig(window="embedder"), window)[1]
    assert [c.text for c in fitted] == [c.text for c in by_words]


def test_an_embedder_without_a_tokenizer_is_bound_by_words() -> None:
    assert ModelWindow.of(HashingEmbedder(dim=32)) is None
    _, chunks = chunk_documents([doc(DENSE_PROSE)], ChunkingConfig(window="embedder"), None)
    assert len(chunks) == 1


def test_a_sentence_past_the_budget_is_cut_into_windows_that_fit() -> None:
    words = ["a", "bb", "ccc", "dddd"] * 10  # costs 1, 2, 3, 4 per word
    bound = Bound(100, [len(w) for w in words], budget=10)
    text = " ".join(words)
    windows = token_windows(text, ChunkingConfig(chunk_tokens=100, overlap_tokens=1), bound)
    for start, end in windows:
        assert sum(len(w) for w in text[start:end].split()) <= 10
    assert windows[0][0] == 0 and windows[-1][1] == len(text)


def test_ingest_records_the_window_it_cut_by(embedder: OnnxMiniLMEmbedder) -> None:
    docs = [Document(page_content=DENSE_PROSE, metadata={"source": "p.md", "title": TITLE})]
    fitted = build_index(
        docs, embedder=embedder, chunking=ChunkingConfig(window="embedder"), progress=False
    )
    assert fitted.manifest.chunking.window == "embedder"
    assert len(fitted.store) > 1
    plain = build_index(docs, embedder=embedder, progress=False)
    assert plain.manifest.chunking.window == "words"
    assert len(plain.store) == 1
