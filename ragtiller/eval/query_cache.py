"""Query vectors memoised for one evaluation session (tuning runs the same queries many times)."""

from __future__ import annotations

from langchain_core.embeddings import Embeddings

from ragtiller.core.providers import model_label


class QueryVectorCache(Embeddings):
    """Wraps an embedder; each distinct query text is embedded once, documents pass through.

    Only for evaluation: a serving process would grow it without bound.
    """

    def __init__(self, inner: Embeddings) -> None:
        self.inner = inner
        self.model_name = model_label(inner)  # the index checks it against its manifest
        self._vectors: dict[str, list[float]] = {}

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed documents with the wrapped model (not memoised)."""
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        """The query's vector, computed on first use."""
        if text not in self._vectors:
            self._vectors[text] = self.inner.embed_query(text)
        return self._vectors[text]

    async def aembed_query(self, text: str) -> list[float]:
        """The query's vector, computed on first use (with the wrapped model's async path)."""
        if text not in self._vectors:
            self._vectors[text] = await self.inner.aembed_query(text)
        return self._vectors[text]
