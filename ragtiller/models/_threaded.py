"""What the in-process model embedders share: a query is a batch of one, async runs in a thread."""

from __future__ import annotations

import asyncio

from langchain_core.embeddings import Embeddings


class ThreadedEmbeddings(Embeddings):
    """An embedder whose model runs in this process and releases the GIL while it computes
    (onnxruntime, torch): the async calls run it in a worker thread, off the event loop."""

    def embed_query(self, text: str) -> list[float]:
        """Embed one query."""
        return self.embed_documents([text])[0]

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed in a worker thread."""
        return await asyncio.to_thread(self.embed_documents, texts)

    async def aembed_query(self, text: str) -> list[float]:
        """Embed one query in a worker thread."""
        return await asyncio.to_thread(self.embed_query, text)
