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
from ragtiller.index.compute import CpuTier, top_k_positive
from ragtiller.index.records import RecordTable
from ragtiller.index.scans import SharedScans, scan_key

# bm25s sets its own logger to DEBUG; under any root handler (one a first model export's
# imports install, say) that printed "DEBUG:bm25s:Building index from tokens" on every ingest
logging.getLogger("bm25s").setLevel(logging.WARNING)

LEXICAL_DIR = "lexical"
BM25_FILES = (
    "params.index.json",
    "vocab.index.json",
    "data.csc.index.npy",
    "indices.csc.index.npy",
    "indptr.csc.index.npy",
)
StopwordLanguage = Literal[
    "en", "de", "nl", "fr", "es", "pt", "it", "ru", "sv", "no", "zh", "tr", "ko", "da"
]


class LexicalConfig(BaseModel):
    """BM25 parameters and text analysis of the lexical tier.

    Example:
        >>> LexicalConfig(k1=1.2, stemmer=None).method
        'lucene'
    """

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
TERM_CACHE = 65536  # texts whose term sets one tier remembers
QUERY_CACHE = 1024  # queries whose analysed terms one tier remembers
SELECTION_DEPTH = 100
"""A query's best rows are selected this deep and kept: a search of it at any depth up to this
(a turn's, with feedback's first pass: k 100) reads them."""
DENSE_SHARE = 4
"""A query term in at least one row in 4 adds its whole score column (kept, :data:`DENSE_COLUMNS`
per tier), not its postings one by one: ``numpy.add.at`` over the postings of 6 common terms
took 6.0 ms at 1M chunks, the same sums as column adds 1.1 ms."""
DENSE_COLUMNS = 16  # at most 16 float32s per chunk (4 MB a column at 1M chunks)
DENSE_ADD_COST = 8  # a kept column adds one float per row, about 1/8 of a posting's cost
INLINE_WORK = 1_000_000
"""``asearch`` runs on the event loop when :meth:`LexicalTier.work` is at most this, about a
millisecond: on the scaling benchmark's turn, 517,000 took 1.3 ms at 100k chunks; at 1M chunks
1.6 million even with the columns kept (2.2 ms), so there the search takes a thread."""


class LexicalTier(CpuTier):
    """The ``lexical`` tier: BM25 (bm25s) over each chunk's :func:`indexed_text`.

    Only chunks sharing a term with the query are returned, scored by raw BM25; filters zero the
    scores of other rows. ``retriever`` indexes ``records`` row for row, analysed by ``config``.
    """

    name = "lexical"
    needs_vector = False

    def __init__(self, records: RecordTable, retriever: bm25s.BM25, config: LexicalConfig) -> None:
        self.records = records
        self.config = config
        self._retriever = retriever
        self._scores = SharedScans()  # a query's scores, kept for the next search of it
        self._selections = SharedScans()  # and select their best rows once
        self._columns = SharedScans(DENSE_COLUMNS)  # score columns of common terms
        self._stemmer = Stemmer.Stemmer(config.stemmer) if config.stemmer else None
        tokens = _tokenizer(config)
        stem = self._stemmer.stemWords if self._stemmer is not None else list
        # memoised: the passage re-score analyses the query and the same passages turn after turn
        self.term_set: Callable[[str], frozenset[str]] = functools.lru_cache(TERM_CACHE)(
            lambda text: frozenset(stem(tokens(text)))
        )
        """The distinct terms of a text under the index's analysis."""
        self.query_terms: Callable[[str], tuple[str, ...]] = functools.lru_cache(QUERY_CACHE)(
            lambda query: tuple(analyze([query], config, self._stemmer)[0])
        )
        """The analysed terms of one query, in order."""

    @classmethod
    def build(
        cls, records: RecordTable, texts: Sequence[str], config: LexicalConfig = DEFAULT_LEXICAL
    ) -> LexicalTier:
        """Index ``texts``, one per row of ``records``."""
        if len(texts) != len(records):
            raise ValueError(f"got {len(texts)} texts for {len(records)} records")
        retriever = bm25s.BM25(method=config.method, k1=config.k1, b=config.b)
        tier = cls(records, retriever, config)
        retriever.index(analyze(texts, config, tier._stemmer), show_progress=False)
        return tier

    def save(self, directory: str | Path) -> None:
        self._retriever.save(str(directory), show_progress=False)

    @classmethod
    def load(
        cls, directory: str | Path, records: RecordTable, config: LexicalConfig
    ) -> LexicalTier:
        """Read an index written by :meth:`save`, memory-mapped, checked against ``records``."""
        path = Path(directory)
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
        """At most ``k`` chunks with a positive BM25 score, best first."""
        rows, scores = self.search_rows(request)
        return [self.records.hit(r, s) for r, s in zip(rows.tolist(), scores.tolist(), strict=True)]

    def search_rows(
        self, request: SearchRequest
    ) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.float32]]:
        """The rows and BM25 scores :meth:`search` returns as hits."""
        if request.k < 1:
            raise ValueError(f"k must be > 0, but got {request.k}")
        key = scan_key(self.query_terms(request.query), request.namespaces, request.filter)
        if key is None or request.k > SELECTION_DEPTH:
            return self._select(request, request.k)
        best, values = self._selections.get(key, lambda: self._select(request, SELECTION_DEPTH))
        if len(best) <= request.k or values[request.k - 1] > values[request.k]:
            return best[: request.k], values[: request.k]
        return self._select(request, request.k)  # a tie at the k-th place: as selected alone

    def _select(
        self, request: SearchRequest, k: int
    ) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.float32]]:
        """The best ``k`` positive rows and their scores, read-only. A deeper selection's first
        ``k`` are these whenever its ``k``-th score beats the next (or it holds fewer rows)."""
        scores = self.row_scores(request)
        best = top_k_positive(scores, k)
        values = scores[best]
        best.flags.writeable = values.flags.writeable = False
        return best, values

    def row_scores(self, request: SearchRequest) -> np.ndarray:
        """BM25 of every row, 0 outside the scope (the unmasked scores are kept per query)."""
        tokens = list(self.query_terms(request.query))
        if not tokens or not len(self.records):
            return np.zeros(len(self.records), dtype=np.float32)
        scores = self._scores.get(tuple(tokens), lambda: self._score(tokens))
        mask = self.records.mask(request.namespaces, request.filter)
        if mask is not None:
            scores = np.where(mask, scores, np.float32(0))
        return scores

    def _score(self, tokens: list[str]) -> np.ndarray:
        scores = np.asarray(
            bm25_scores(self._retriever, tokens, columns=self._columns), dtype=np.float32
        )
        scores.flags.writeable = False
        return scores

    @property
    def rows(self) -> int:
        return len(self.records)

    def work(self, request: SearchRequest) -> int:
        """What a search costs, known before scoring: its terms' postings (none when the scores
        are kept) plus the rows each pass over the scores reads."""
        tokens = self.query_terms(request.query)
        passes = 1 if not request.namespaces and not request.filter else 2
        if self._scores.holds(tokens):
            return passes * len(self.records)
        vocab, indptr = self._retriever.vocab_dict, self._retriever.scores["indptr"]
        rows = len(self.records)
        work = passes * rows
        for term in (vocab[t] for t in tokens if t in vocab):
            kept = self._columns.holds(term)
            work += rows // DENSE_ADD_COST if kept else int(indptr[term + 1]) - int(indptr[term])
        return work

    def inline(self, request: SearchRequest) -> bool:
        """Search on the event loop when small or cheap (:data:`INLINE_WORK`), else in a thread."""
        return self.rows <= compute.INLINE_ROWS or self.work(request) <= INLINE_WORK

    def idf(self, terms: Iterable[str]) -> dict[str, float]:
        """Lucene IDF of each analysed term; one the index never saw counts as seen once (it is
        rare, not worthless)."""
        vocab, stats = self._retriever.vocab_dict, self._retriever.scores
        indptr, n = stats["indptr"], float(stats["num_docs"])
        out: dict[str, float] = {}
        for term in terms:
            pos = vocab.get(term)
            df = float(indptr[pos + 1] - indptr[pos]) if pos is not None else 1.0
            out[term] = lucene_idf(df, n)
        return out


def bm25_scores(
    retriever: bm25s.BM25, tokens: Sequence[str], *, columns: SharedScans | None = None
) -> npt.NDArray[np.floating]:
    """``retriever.get_scores(tokens)``, the same sums in the same order, cheaper.

    ``numpy.add.at`` runs faster with ``intp`` indices than with the saved ``int32`` ones (7.0
    against 8.8 ms for 4.5 million postings). With ``columns``, a common term (:data:`DENSE_SHARE`)
    adds its whole column instead, kept there: 0 where it is absent, so the sums are the same.
    """
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
    """The terms BM25 sees in each text: bm25s' token pattern, lower-casing, ``config``'s
    stopwords and stemmer (``stemmer``, if built already).

    Shared by the bm25s index and the Pinecone sparse vectors, so both count the same terms. It
    is bm25s' ``tokenize`` without its progress bars: a tqdm bar, even a disabled one, takes a
    multiprocessing lock on first use, a blocking call the LangGraph server refuses on its loop.

    Example:
        >>> analyze(["Running the tests", ""], LexicalConfig())
        [['run', 'test'], []]
    """
    if stemmer is None and config.stemmer:
        stemmer = Stemmer.Stemmer(config.stemmer)
    split = [*map(_tokenizer(config), texts)]
    if stemmer is None:
        return split
    vocabulary = list(dict.fromkeys(t for tokens in split for t in tokens))
    stems = dict(zip(vocabulary, stemmer.stemWords(vocabulary), strict=True))
    return [[stems[t] for t in tokens] for tokens in split]


def _tokenizer(config: LexicalConfig) -> Callable[[str], list[str]]:
    """A text's tokens before stemming, less ``config``'s stopwords."""
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
    """The text a stored chunk is embedded and BM25-indexed under, from its record alone: its
    ``header`` or title, then the text. Every backend calls this, so all index the same text.

    Example:
        >>> indexed_text("Prices rose.", {"title": None, "header": "Oil crisis / Effects"})
        'Oil crisis / Effects Prices rose.'
    """
    return lexical_text(text, metadata.get(HEADER_KEY) or metadata.get("title"))
