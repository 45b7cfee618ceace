"""Length-sorted batching in ``embed_texts``: short texts together, rows back in input order."""

from __future__ import annotations

import numpy as np

from ragtiller.models import HashingEmbedder, embed_texts


class RecordingEmbedder(HashingEmbedder):
    """A hashing embedder that remembers the batches it was given."""

    def __init__(self) -> None:
        super().__init__(dim=32)
        self.batches: list[list[str]] = []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.batches.append(list(texts))
        return super().embed_documents(texts)


def test_batches_are_length_sorted_and_rows_keep_input_order() -> None:
    texts = ["a" * n + f" word{n}" for n in (50, 3, 27, 1, 40, 9, 33)]
    embedder = RecordingEmbedder()
    matrix = embed_texts(embedder, texts, batch_size=3, progress=False)
    sent = [t for batch in embedder.batches for t in batch]
    assert sent == sorted(texts, key=len)
    assert [len(b) for b in embedder.batches] == [3, 3, 1]
    expected = np.asarray(HashingEmbedder(dim=32).embed_documents(texts), dtype=np.float32)
    assert np.allclose(matrix, expected, atol=1e-6)
