"""The lexical tier: BM25 over the child chunks with bm25s (exact terms, identifiers, codes)."""

from __future__ import annotations

import functools
import logging
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import bm25s
import numpy as np
import numpy.typing as npt
import Stemmer
from pydantic import BaseModel, ConfigDict, Field, field_validator

from ragtiller.core.tiers import Hit, SearchRequest
from ragtiller.errors import IndexStoreError
from ragtiller.index import compute
from ragtiller.index.compute import CpuTier, SharedScans, scan_key, top_k_positive
from ragtiller.index.records import RecordTable

# bm25s sets its logger to DEBUG: under any root handler it printed a line on every ingest
logging.getLogger("bm25s").setLevel(logging.WARNING)

LEXICAL_DIR = "lexical"
_CSC = ("data", "indices", "indptr")
BM25_FILES = ("params.index.json", "vocab.index.json", *(f"{a}.csc.index.npy" for a in _CSC))
RowScores = tuple[npt.NDArray[np.intp], npt.NDArray[np.float32]]  # rows, best first, and scores
StopwordLanguage = Literal[
    "en", "de", "nl", "fr", "es", "pt", "it", "ru", "sv", "no", "zh", "tr", "ko", "da"
]


class LexicalConfig(BaseModel):
    """BM25 parameters and text analysis of the lexical tier."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    method: Literal["lucene", "robertson", "atire", "bm25l", "bm25+"] = "lucene"
    k1: float = Field(1.5, gt=0, description="Term-frequency saturation.")
    b: float = Field(0.75, ge=0, le=1, description="Document-length normalisation.")
    stemmer: str | None = Field("english", description="A PyStemmer algorithm, or None.")
    stopwords: StopwordLanguage | None = Field("en", description="bm25s stopword list, or None.")

    @field_validator("stemmer")
    @classmethod
    def _known_stemmer(cls, value: str | None) -> str | None:
        if value is not None and value not in Stemmer.algorithms():
            raise ValueError(
                f"stemmer must be None or one of {sorted(Stemmer.algorithms())}, but got {value!r}"
            )
        return value


DEFAULT_LEXICAL = LexicalConfig()
_TOKEN_PATTERN = r"(?u)\b\w\w+\b"  # bm25s' default (scikit-learn's)
TERM_CACHE, QUERY_CACHE = 65536, 1024  # texts and queries whose analysis one tier remembers
SELECTION_DEPTH = 100  # a query's best rows are kept this deep, for a turn's searches (k <= 100)
# a term in one row in 4 or more adds its whole (kept) score column, not its postings one by one:
# for 6 common terms at 1M chunks, 1.1 ms against 6.0 ms of numpy.add.at, the same sums
DENSE_SHARE = 4
DENSE_COLUMNS = 16  # columns kept per tier: 4 MB each at 1M chunks
DENSE_ADD_COST = 8  # a kept column adds one float per row, about 1/8 of a posting's cost
# most LexicalTier.work searched on the event loop, about a millisecond (517,000 took 1.3 ms at
# 100k chunks; at 1M chunks 1.6 million, even with columns kept, takes a thread)
INLINE_WORK = 1_000_000


class LexicalTier(CpuTier):
    """The ``lexical`` tier: raw BM25 (bm25s) over each chunk's :func:`indexed_text`."""

    name = "lexical"
    needs_vector = False

    def __init__(self, records: RecordTable, retriever: bm25s.BM25, config: LexicalConfig) -> None:
        self.records = records
        self.config = config
        self._retriever = retriever
        self._scores = SharedScans()  # a query's scores, kept for the next search of it
        self._selections = SharedScans()  # and their best rows
        self._columns = SharedScans(DENSE_COLUMNS)  # score columns of common terms
        self._stemmer = Stemmer.Stemmer(config.stemmer) if config.stemmer else None
        tokens = _tokenizer(config)
        stem = self._stemmer.stemWords if self._stemmer is not None else list
        # memoised: the passage re-score analyses the query and the same passages turn after turn
        self.term_set: Callable[[str], frozenset[str]] = functools.lru_cache(TERM_CACHE)(
            lambda text: frozenset(stem(tokens(text)))
        )
        self.query_terms: Callable[[str], tuple[str, ...]] = functools.lru_cache(QUERY_CACHE)(
            lambda query: tuple(analyze([query], config, self._stemmer)[0])
        )

    @classmethod
    def build(
        cls, records: RecordTable, texts: Sequence[str], config: LexicalConfig = DEFAULT_LEXICAL
    ) -> LexicalTier:
        if len(texts) != len(records):
            raise ValueError(f"got {len(texts)} texts for {len(records)} records")
        retriever = bm25s.BM25(method=config.method, k1=config.k1, b=config.b)
        tier = cls(records, retriever, config)
        retriever.index(analyze(texts, config, tier._stemmer), show_progress=False)
        return tier

    def save(self, directory: Path) -> None:
        self._retriever.save(str(directory), show_progress=False)

    @classmethod
    def load(cls, path: Path, records: RecordTable, config: LexicalConfig) -> LexicalTier:
        """Read what :meth:`save` wrote, memory-mapped, checked against ``records``."""
        for name in BM25_FILES:
            if not (path / name).is_file():
                raise IndexStoreError(f"index file {path / name} is missing")
        try:
            retriever = bm25s.BM25.load(str(path), load_corpus=False, mmap=True)
        except (OSError, ValueError, KeyError) as e:
            raise IndexStoreError(f"lexical index {path} is corrupt: {e}") from e
        if retriever.scores["num_docs"] != len(records):
            raise IndexStoreError(
                f"index file {path / BM25_FILES[0]} is corrupt: it indexes "
                f"{retriever.scores['num_docs']} chunks, the chunk table has {len(records)}"
            )
        return cls(records, retriever, config)

    def search(self, request: SearchRequest) -> list[Hit]:
        rows, scores = self.search_rows(request)
        return [self.records.hit(r, s) for r, s in zip(rows.tolist(), scores.tolist(), strict=True)]

    def search_rows(self, request: SearchRequest) -> RowScores:
        if request.k < 1:
            raise ValueError(f"k must be > 0, but got {request.k}")
        key = scan_key(self.query_terms(request.query), request.namespaces, request.filter)
        if key is None or request.k > SELECTION_DEPTH:
            return self._select(request, request.k)
        best, values = self._selections.get(key, lambda: self._select(request, SELECTION_DEPTH))
        if len(best) <= request.k or values[request.k - 1] > values[request.k]:
            return best[: request.k], values[: request.k]
        return self._select(request, request.k)  # a tie at the k-th place: as selected alone

    def _select(self, request: SearchRequest, k: int) -> RowScores:
        scores = self.row_scores(request)
        best = top_k_positive(scores, k)
        values = scores[best]
        best.flags.writeable = values.flags.writeable = False
        return best, values

    def row_scores(self, request: SearchRequest) -> np.ndarray:
        """BM25 of every row, 0 outside the scope (the unmasked scores are kept per query)."""
        tokens = self.query_terms(request.query)
        if not tokens or not len(self.records):
            return np.zeros(len(self.records), dtype=np.float32)
        scores = self._scores.get(tokens, lambda: self._score(tokens))
        mask = self.records.mask(request.namespaces, request.filter)
        if mask is not None:
            scores = np.where(mask, scores, np.float32(0))
        return scores

    def _score(self, tokens: Sequence[str]) -> np.ndarray:
        scores = np.asarray(
            bm25_scores(self._retriever, tokens, columns=self._columns), dtype=np.float32
        )
        scores.flags.writeable = False
        return scores

    @property
    def rows(self) -> int:
        return len(self.records)

    def work(self, request: SearchRequest) -> int:
        """A search's cost, known before scoring: its postings (or kept columns) and rows read."""
        tokens, rows = self.query_terms(request.query), len(self.records)
        work = rows if not request.namespaces and not request.filter else 2 * rows
        if self._scores.holds(tokens):
            return work
        vocab, indptr = self._retriever.vocab_dict, self._retriever.scores["indptr"]
        for term in (vocab[t] for t in tokens if t in vocab):
            kept = self._columns.holds(term)
            work += rows // DENSE_ADD_COST if kept else int(indptr[term + 1]) - int(indptr[term])
        return work

    def inline(self, request: SearchRequest) -> bool:
        return self.rows <= compute.INLINE_ROWS or self.work(request) <= INLINE_WORK

    def idf(self, terms: Iterable[str]) -> dict[str, float]:
        """Lucene IDF of each term; one the index never saw counts as seen once (rare, not nil)."""
        vocab, stats = self._retriever.vocab_dict, self._retriever.scores
        indptr, n = stats["indptr"], float(stats["num_docs"])
        rows = {t: vocab.get(t) for t in terms}
        return {
            t: lucene_idf(1.0 if p is None else float(indptr[p + 1] - indptr[p]), n)
            for t, p in rows.items()
        }


def bm25_scores(
    retriever: bm25s.BM25, tokens: Sequence[str], *, columns: SharedScans | None = None
) -> npt.NDArray[np.floating]:
    """``retriever.get_scores(tokens)``, the same sums, cheaper: ``intp`` indices (7.0 against
    8.8 ms for 4.5 million postings) and, with ``columns``, common terms' kept columns."""
    vocab, stats = retriever.vocab_dict, retriever.scores
    data, indices, indptr = stats["data"], stats["indices"], stats["indptr"]
    ids = [vocab[t] for t in tokens if t in vocab]
    rows, dtype = stats["num_docs"], np.dtype(retriever.dtype)
    scores = np.zeros(rows, dtype=dtype)
    for term in ids:
        start, end = int(indptr[term]), int(indptr[term + 1])
        if columns is not None and (end - start) * DENSE_SHARE >= rows:
            make = functools.partial(_column, rows, dtype, indices[start:end], data[start:end])
            scores += columns.get(term, make)
        else:
            np.add.at(scores, indices[start:end].astype(np.intp), data[start:end])
    if retriever.nonoccurrence_array is not None:  # bm25l and bm25+ score absent terms too
        scores += retriever.nonoccurrence_array[np.asarray(ids, dtype=np.intp)].sum()
    return scores


def _column(
    rows: int, dtype: np.dtype[Any], indices: npt.NDArray[Any], data: npt.NDArray[Any]
) -> npt.NDArray[Any]:
    column = np.zeros(rows, dtype=dtype)
    np.add.at(column, indices.astype(np.intp), data)
    column.flags.writeable = False
    return column


def analyze(
    texts: Sequence[str], config: LexicalConfig, stemmer: Stemmer.Stemmer | None = None
) -> list[list[str]]:
    """The terms BM25 sees in each text (bm25s and Pinecone alike): bm25s' ``tokenize`` without
    its tqdm bars, whose multiprocessing lock the LangGraph server refuses on its event loop."""
    if stemmer is None and config.stemmer:
        stemmer = Stemmer.Stemmer(config.stemmer)
    split = [*map(_tokenizer(config), texts)]
    if stemmer is None:
        return split
    vocabulary = list(dict.fromkeys(t for tokens in split for t in tokens))
    stems = dict(zip(vocabulary, stemmer.stemWords(vocabulary), strict=True))
    return [[stems[t] for t in tokens] for tokens in split]


def _tokenizer(config: LexicalConfig) -> Callable[[str], list[str]]:
    stop = frozenset(bm25s.tokenization._infer_stopwords(config.stopwords or []))
    find = re.compile(_TOKEN_PATTERN).findall
    return lambda text: [t for t in find(text.lower()) if t not in stop]


def lucene_idf(df: float, n: float) -> float:
    """Lucene's IDF of a term found in ``df`` of ``n`` texts.

    Example:
        >>> round(lucene_idf(1, 10), 3)
        1.992
    """
    return math.log(1.0 + (n - df + 0.5) / (df + 0.5))


def lexical_text(text: str, title: str | None) -> str:
    """The text a chunk is indexed under: its title, a space, the text (as BEIR baselines).

    Example:
        >>> lexical_text("Run make.", "Setup")
        'Setup Run make.'
    """
    return f"{title} {text}" if title else text


HEADER_KEY = "header"  # chunk metadata: the header ingest chose (chunking.header: path)


def indexed_text(text: str, metadata: Mapping[str, Any]) -> str:
    """The text a stored chunk is embedded and BM25-indexed under, for every backend: its
    ``header`` or title, then the text."""
    return lexical_text(text, metadata.get(HEADER_KEY) or metadata.get("title"))
