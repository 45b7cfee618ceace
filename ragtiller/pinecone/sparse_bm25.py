"""BM25 as sparse vectors: document-side term weights, query-side IDF weights, one dot product.

A search engine that scores sparse vectors by dot product (Pinecone) computes BM25 exactly when
a document carries, per term, the term-frequency part ``tfc(tf, dl, avgdl)`` and the query
carries, per term, ``count x idf(df, N)``: their dot product is the score bm25s computes. Both
sides analyse text with :func:`~ragtiller.index.lexical.analyze`, as the embedded tier does.

The corpus statistics (``N``, total length, each term's document frequency and sparse index)
are a :class:`BM25Stats`; documents and queries must be encoded with the same statistics.
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Annotated

import Stemmer
from pydantic import BaseModel, ConfigDict, Field
from typing_extensions import TypedDict

from ragtiller.errors import ConfigurationError
from ragtiller.index.lexical import LexicalConfig, analyze

SPARSE_METHODS = ("lucene", "robertson", "atire")
"""BM25 variants a dot product reproduces; bm25l and bm25+ add a score to documents without the term."""
_INDEX_SPACE = 2**32
"""Pinecone's sparse indices are unsigned 32-bit integers."""


class SparseVector(TypedDict):
    """A sparse vector as Pinecone takes it: parallel lists, indices unique."""

    indices: list[int]
    values: list[float]


class BM25Stats(BaseModel):
    """Corpus statistics that BM25 sparse vectors are encoded with.

    ``terms`` maps each analysed term to ``[sparse index, document frequency]``. A term's index
    is a hash of the term (the next free one on the rare collision), so two corpora give most
    terms the same index.

    Example:
        >>> stats = BM25Stats.build(["a cat sat", "a dog sat"], LexicalConfig())
        >>> (stats.documents, stats.avgdl, stats.terms["sat"][1])
        (2, 2.0, 2)
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    lexical: LexicalConfig
    documents: Annotated[int, Field(ge=0, description="N: documents (chunks) counted.")]
    total_length: Annotated[int, Field(ge=0, description="Sum of document lengths, in terms.")]
    terms: dict[str, tuple[int, int]] = Field(default_factory=dict)

    @property
    def avgdl(self) -> float:
        """Average document length, in terms (1.0 for an empty corpus)."""
        return self.total_length / self.documents if self.documents else 1.0

    @classmethod
    def build(cls, texts: Sequence[str], config: LexicalConfig) -> BM25Stats:
        """Count ``texts`` (the indexed text of every chunk, see ``lexical_text``).

        Raises:
            ConfigurationError: ``config.method`` has no sparse-vector form.
        """
        _check_method(config)
        tokens = analyze(texts, config)
        df: Counter[str] = Counter()
        for doc in tokens:
            df.update(set(doc))
        terms: dict[str, tuple[int, int]] = {}
        taken: set[int] = set()
        for term in sorted(df):  # sorted: the same corpus gives the same indices everywhere
            index = _free_index(term, taken)
            taken.add(index)
            terms[term] = (index, df[term])
        return cls(
            lexical=config,
            documents=len(tokens),
            total_length=sum(len(doc) for doc in tokens),
            terms=terms,
        )


class BM25SparseEncoder:
    """Encode documents and queries into BM25 sparse vectors with one set of statistics.

    Args:
        stats: The corpus statistics.

    Raises:
        ConfigurationError: The statistics' BM25 method has no sparse-vector form.

    Example:
        >>> stats = BM25Stats.build(["a cat sat", "a dog sat", "birds"], LexicalConfig())
        >>> encoder = BM25SparseEncoder(stats)
        >>> doc, query = encoder.encode_documents(["a cat sat"])[0], encoder.encode_query("cat")
        >>> round(sum(v * w for i, v in zip(doc["indices"], doc["values"])
        ...           for j, w in zip(query["indices"], query["values"]) if i == j), 4)
        0.3599
    """

    def __init__(self, stats: BM25Stats) -> None:
        _check_method(stats.lexical)
        self.stats = stats
        config = stats.lexical
        self._stemmer = Stemmer.Stemmer(config.stemmer) if config.stemmer else None
        self._idf = _idf_function(config.method)

    def encode_documents(self, texts: Sequence[str]) -> list[SparseVector]:
        """Per document, each known term's ``tfc``; a document without terms gets empty lists."""
        config, stats = self.stats.lexical, self.stats
        avgdl = stats.avgdl
        vectors: list[SparseVector] = []
        for doc in analyze(texts, config, self._stemmer):
            counts = Counter(t for t in doc if t in stats.terms)
            norm = config.k1 * (1 - config.b + config.b * len(doc) / avgdl)
            scale = config.k1 + 1 if config.method == "atire" else 1.0
            pairs = sorted((stats.terms[t][0], scale * n / (n + norm)) for t, n in counts.items())
            vectors.append(
                SparseVector(indices=[i for i, _ in pairs], values=[v for _, v in pairs])
            )
        return vectors

    def encode_query(self, text: str) -> SparseVector:
        """Each known query term's ``count x idf``.

        Unknown terms are dropped, as bm25s does; so are terms whose IDF is 0 (robertson and
        atire give 0 to very common terms), which add nothing to any score.
        """
        stats = self.stats
        terms = analyze([text], stats.lexical, self._stemmer)[0]
        counts = Counter(t for t in terms if t in stats.terms)
        weighted = (
            (stats.terms[t][0], n * self._idf(stats.terms[t][1], stats.documents))
            for t, n in counts.items()
        )
        pairs = sorted((i, w) for i, w in weighted if w > 0)
        return SparseVector(indices=[i for i, _ in pairs], values=[v for _, v in pairs])


def _check_method(config: LexicalConfig) -> None:
    if config.method not in SPARSE_METHODS:
        raise ConfigurationError(
            f"BM25 method {config.method!r} has no sparse-vector form (it scores documents "
            f"without the query terms too); use one of {', '.join(SPARSE_METHODS)}"
        )


def _idf_function(method: str) -> Callable[[int, int], float]:
    return {"lucene": _idf_lucene, "robertson": _idf_robertson, "atire": _idf_atire}[method]


def _idf_lucene(df: int, n: int) -> float:
    return math.log(1 + (n - df + 0.5) / (df + 0.5))


def _idf_robertson(df: int, n: int) -> float:
    return math.log(max(1.0, (n - df + 0.5) / (df + 0.5)))


def _idf_atire(df: int, n: int) -> float:
    return math.log(n / df)


def _free_index(term: str, taken: set[int]) -> int:
    index = int.from_bytes(hashlib.blake2b(term.encode(), digest_size=4).digest(), "big")
    while index in taken:
        index = (index + 1) % _INDEX_SPACE
    return index


__all__ = ("SPARSE_METHODS", "BM25SparseEncoder", "BM25Stats", "SparseVector")
