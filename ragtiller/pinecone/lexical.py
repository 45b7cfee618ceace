"""Pinecone as the lexical tier: BM25 sparse vectors in a sparse index, queries encoded locally.

It uses the ``pinecone`` SDK, not ``langchain_pinecone.PineconeSparseVectorStore``: that store
takes only a ``PineconeSparseEmbeddings`` (Pinecone's hosted sparse model, one encoding for
documents and queries), while BM25 weighs the two sides differently (term frequencies on
documents, IDF on queries) with statistics ragtiller keeps. See ``docs/pinecone.md``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from langchain_core.documents import Document

from ragtiller.core.filters import to_where
from ragtiller.core.tiers import SearchRequest
from ragtiller.errors import ConfigurationError, TierUnavailable
from ragtiller.pinecone.calls import (
    NamespacedSearch,
    QueryOne,
    searchable,
)
from ragtiller.pinecone.sparse_bm25 import BM25SparseEncoder
from ragtiller.pinecone.stats import read_stats, read_version

TEXT_KEY = "text"
"""Metadata key holding a chunk's text, as in the dense index."""


class PineconeLexicalTier(NamespacedSearch):
    """The ``lexical`` tier served by a Pinecone sparse index (metric ``dotproduct``).

    A query is analysed as the embedded tier analyses it (bm25s tokenizer, stopwords, stemmer)
    and encoded into IDF weights with the corpus statistics stored in the index by
    ``upsert_lexical``; the documents there carry their term-frequency weights, so Pinecone's
    dot product is the BM25 score bm25s gives. Hits have the embedded lexical tier's contract:
    only chunks sharing a term with the query, best first, ``id``, ``text``, ``doc_id``,
    ``parent_id`` and ``source`` from the chunk, ``metadata["namespace"]`` the namespace.

    The statistics are fetched on the first search and checked again (one small fetch) once
    ``stats_ttl_s`` has passed, so a re-ingest reaches every replica within that time. Calls,
    deadline and namespace merging are the dense Pinecone tier's.

    Args:
        index: A ``pinecone`` data-plane ``Index``, or a zero-argument function making one on
            first search (so that building the tier does no network I/O).
        name: The tier's name; ``lexical`` replaces the embedded lexical tier.
        timeout_s: Deadline for one search (statistics included), in seconds.
        max_in_flight: Calls to the index in flight at once, abandoned ones included; more fail
            at once with :class:`PineconeTierError`, so a stuck index cannot pile up threads.
        stats_ttl_s: How long fetched statistics are used before their version is checked.
        clock: Monotonic seconds; tests pass a fake.

    Raises:
        ConfigurationError: ``timeout_s`` or ``stats_ttl_s`` is not positive, or
            ``max_in_flight`` < 1.

    Example:
        >>> def connect():  # called on the first search, not here
        ...     raise AssertionError("no I/O when the tier is built")
        >>> tier = PineconeLexicalTier(connect, timeout_s=2.0)
        >>> (tier.name, tier.needs_vector, tier.timeout_s)
        ('lexical', False, 2.0)
    """

    needs_vector = False

    def __init__(
        self,
        index: Any,
        *,
        name: str = "lexical",
        timeout_s: float = 5.0,
        max_in_flight: int = 16,
        stats_ttl_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(name, timeout_s, max_in_flight)
        if stats_ttl_s <= 0:
            raise ConfigurationError(f"stats_ttl_s must be > 0, but got {stats_ttl_s}")
        self.stats_ttl_s = stats_ttl_s
        self._clock = clock
        self._index: Any = index if hasattr(index, "query") else None
        self._connect: Callable[[], Any] | None = None if self._index is not None else index
        self._lock = threading.Lock()
        self._encoder: tuple[str, BM25SparseEncoder] | None = None
        self._checked_at = 0.0

    @property
    def index(self) -> Any:
        """The ``pinecone`` index handle, made on first use when the tier was given a function."""
        with self._lock:
            if self._index is None:
                assert self._connect is not None
                self._index = self._connect()
            return self._index

    def encoder(self) -> BM25SparseEncoder:
        """The query encoder for the index's current statistics (fetched or re-checked if due).

        Raises:
            TierUnavailable: ``no-statistics``: the index holds no BM25 statistics yet.
        """
        index = self.index
        with self._lock:
            now = self._clock()
            if self._encoder is not None and now - self._checked_at < self.stats_ttl_s:
                return self._encoder[1]
            if self._encoder is None or read_version(index) != self._encoder[0]:
                found = read_stats(index)
                if found is None:
                    raise TierUnavailable(
                        "no-statistics",
                        f"Pinecone tier {self.name!r}: the sparse index holds no BM25 statistics; "
                        "run upsert_lexical first",
                    )
                self._encoder = (found[0], BM25SparseEncoder(found[1]))
            self._checked_at = now
            return self._encoder[1]

    def _query(self, request: SearchRequest) -> QueryOne:
        """Chunks with a positive BM25 score; the tier reads the text, not the vector.

        Raises:
            ValueError: ``request.k`` < 1.
            TierUnavailable: The index holds no BM25 statistics (``no-statistics``), raised
                from the worker under the deadline.
        """
        text, k, filter = request.query, request.k, request.filter
        if k < 1:
            raise ValueError(f"k must be > 0, but got {k}")

        def query(namespace: str) -> list[tuple[Document, float]]:
            sparse = self.encoder().encode_query(text)  # in the worker: under the deadline
            if not sparse["indices"]:
                return []
            response = self.index.query(
                sparse_vector=sparse,
                top_k=k,
                namespace=namespace,
                include_metadata=True,
                filter=to_where(filter),
            )
            return [pair for match in response.matches if (pair := _pair(match)) is not None]

        return query

    def _list_namespaces(self) -> list[str]:
        stats = self.index.describe_index_stats()
        return searchable({name: s.vector_count for name, s in stats.namespaces.items()})


def _pair(match: Any) -> tuple[Document, float] | None:
    """A match as (chunk, score); None without text or without a positive score."""
    metadata = dict(match.metadata or {})
    text = metadata.pop(TEXT_KEY, None)
    score = float(match.score or 0.0)
    if text is None or score <= 0:
        return None
    return Document(id=match.id, page_content=str(text), metadata=metadata), score


__all__ = ("PineconeLexicalTier",)
