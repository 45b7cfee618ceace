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
_TOKEN_PATTERN = r"(?u)\b\w\w+\b"
"""bm25s' default token pattern (scikit-learn's), which :func:`analyze` uses."""
TERM_CACHE = 65536
"""Texts whose term sets one tier remembers (:meth:`LexicalTier.term_set`)."""
QUERY_CACHE = 1024
"""Queries whose analysed terms one tier remembers (:meth:`LexicalTier.query_terms`)."""
SELECTION_DEPTH = 100
"""Each selection of a query's best rows is made this deep and kept: a search of the same query
at any depth up to it (a turn's, with feedback's first pass: k 100) reads it."""
DENSE_SHARE = 4
"""A query term found in at least one row in ``DENSE_SHARE`` adds its whole score column (kept
per tier, :data:`DENSE_COLUMNS` of them), not its postings one by one: ``numpy.add.at`` over
the postings of 6 common terms took 6.0 ms at 1M chunks, the same sums as column adds 1.1 ms."""
DENSE_COLUMNS = 16
"""Score columns of common terms one tier keeps: at most 16 float32s per chunk (64 B; 4 MB a
column at 1M chunks)."""
DENSE_ADD_COST = 8
"""A kept column adds one float per row, about an eighth of the cost of a posting."""
INLINE_WORK = 1_000_000
"""``asearch`` runs on the event loop when :meth:`LexicalTier.work` is at most this: about a
millisecond of CPU. Measured on the scaling benchmark's default turn: at 100k chunks 517,000
(columns not yet kept) took 1.3 ms, 163,000 (kept) 0.5 ms, scoring, selection and hits; at 1M
chunks 1.6 million even with the columns kept (2.2 ms), so there the search takes a thread."""


class LexicalTier(CpuTier):
    """The ``lexical`` tier: BM25 (bm25s) over each chunk's indexed text.

    The indexed text of a chunk is its document title (or the header ingest chose, see
    :func:`indexed_text`), a space, and the chunk text (as BEIR baselines index
    ``title + " " + text``). Only chunks sharing at least one term with the query
    are returned, scored by raw BM25. Namespace and metadata filters zero the scores of other
    rows. ``asearch`` runs inline up to :data:`~ragtiller.index.compute.INLINE_ROWS` chunks, or
    when the query's postings are few (:meth:`inline`), and in a worker thread otherwise.

    Build with :meth:`build`; persist with :meth:`save` and :meth:`load`.

    Args:
        records: The chunks, row-aligned with the BM25 index.
        retriever: A bm25s index over ``records``.
        config: The analysis used to build it (queries are analysed the same way).
    """

    name = "lexical"
    needs_vector = False

    def __init__(
        self,
        records: RecordTable,
        retriever: bm25s.BM25,
        config: LexicalConfig,
    ) -> None:
        self.records = records
        self.config = config
        self._retriever = retriever
        self._scores = SharedScans()  # a query's scores, kept for the next search of it
        self._selections = SharedScans()  # and select their best rows once
        self._columns = SharedScans(DENSE_COLUMNS)  # score columns of common terms
        self._stemmer = Stemmer.Stemmer(config.stemmer) if config.stemmer else None
        tokens = _tokenizer(config)
        stem = self._stemmer.stemWords if self._stemmer is not None else list

        @functools.lru_cache(maxsize=TERM_CACHE)
        def term_set(text: str) -> frozenset[str]:
            return frozenset(stem(tokens(text)))

        self._term_set = term_set

        @functools.lru_cache(maxsize=QUERY_CACHE)
        def query_terms(query: str) -> tuple[str, ...]:
            return tuple(analyze([query], config, self._stemmer)[0])

        self._query_terms = query_terms

    @classmethod
    def build(
        cls,
        records: RecordTable,
        texts: Sequence[str],
        config: LexicalConfig = DEFAULT_LEXICAL,
    ) -> LexicalTier:
        """Index ``texts`` (one per row of ``records``, usually title-prefixed chunk text).

        Raises:
            ValueError: ``texts`` and ``records`` differ in length.
        """
        if len(texts) != len(records):
            raise ValueError(f"got {len(texts)} texts for {len(records)} records")
        retriever = bm25s.BM25(method=config.method, k1=config.k1, b=config.b)
        tier = cls(records, retriever, config)
        retriever.index(analyze(texts, config, tier._stemmer), show_progress=False)
        return tier

    def save(self, directory: str | Path) -> None:
        """Write the BM25 index into ``directory`` (created if needed)."""
        self._retriever.save(str(directory), show_progress=False)

    @classmethod
    def load(
        cls,
        directory: str | Path,
        records: RecordTable,
        config: LexicalConfig,
    ) -> LexicalTier:
        """Read an index written by :meth:`save`, memory-mapping its arrays.

        Raises:
            IndexStoreError: A file is missing or unreadable, or the index does not match
                ``records``; the message names the file.
        """
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
        """At most ``k`` chunks with a positive BM25 score, best first; ``vector`` is ignored.

        Raises:
            ValueError: ``k`` < 1.
        """
        rows, scores = self.search_rows(request)
        return [self.records.hit(r, s) for r, s in zip(rows.tolist(), scores.tolist(), strict=True)]

    def search_rows(
        self, request: SearchRequest
    ) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.float32]]:
        """The rows and BM25 scores :meth:`search` returns as hits, best first.

        Raises:
            ValueError: ``k`` < 1.
        """
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
        """The best ``k`` positive rows and their scores (:func:`top_k_positive`), read-only.

        A deeper selection's first ``k`` are these whenever its ``k``-th score beats the next
        one (or it holds fewer than ``k`` rows): then the top ``k`` is one set, ordered alike.
        """
        scores = self.row_scores(request)
        best = top_k_positive(scores, k)
        values = scores[best]
        best.flags.writeable = values.flags.writeable = False
        return best, values

    def query_terms(self, query: str) -> tuple[str, ...]:
        """The analysed terms of one query, in order (memoised: the lexical tier and the
        passage re-score analyse it each turn)."""
        return self._query_terms(query)

    def row_scores(self, request: SearchRequest) -> np.ndarray:
        """BM25 of every row for ``request.query``, 0 outside its namespaces and filter (the
        unmasked scores are kept per query and shared, see :mod:`ragtiller.index.scans`)."""
        tokens = list(self.query_terms(request.query))
        if not tokens or not len(self.records):
            return np.zeros(len(self.records), dtype=np.float32)
        scores = self._scores.get(tuple(tokens), lambda: self._score(tokens))
        mask = self.records.mask(request.namespaces, request.filter)
        if mask is not None:
            scores = np.where(mask, scores, np.float32(0))
        return scores

    def _score(self, tokens: list[str]) -> np.ndarray:
        """BM25 of every row for the analysed query, read-only (kept and shared)."""
        scores = np.asarray(
            bm25_scores(self._retriever, tokens, columns=self._columns), dtype=np.float32
        )
        scores.flags.writeable = False
        return scores

    @property
    def rows(self) -> int:
        """Rows one search scans."""
        return len(self.records)

    def work(self, request: SearchRequest) -> int:
        """What one search of ``request`` costs, known before scoring: the postings of its
        terms (none when the scores are kept) plus the rows each pass over the scores reads."""
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
        """Search on the event loop when small (:data:`~ragtiller.index.compute.INLINE_ROWS`
        rows) or cheap (:meth:`work` at most :data:`INLINE_WORK`), else in a worker thread."""
        return self.rows <= compute.INLINE_ROWS or self.work(request) <= INLINE_WORK

    def term_set(self, text: str) -> frozenset[str]:
        """The distinct terms the index's analysis finds in ``text``, without bm25s' per-call cost.

        The same analysis (bm25s' token pattern, lower-casing, stopwords, stemmer), memoised
        per text: the passage re-score reads the sentences of the same passages turn after turn.
        """
        return self._term_set(text)

    def idf(self, terms: Iterable[str]) -> dict[str, float]:
        """Lucene IDF, ``log(1 + (N - df + 0.5) / (df + 0.5))``, of each analysed term.

        A term the index never saw counts as seen in one row (it is rare, not worthless).
        """
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

    bm25s adds each query term's column of precomputed scores with ``numpy.add.at``, which
    runs faster with ``intp`` indices than with the saved ``int32`` ones (7.0 against 8.8 ms
    for 4.5 million postings). With ``columns``, a term in at least one row in
    :data:`DENSE_SHARE` adds its whole column instead, kept there (a term's postings name a row
    once, so the column holds each posting's score and 0 elsewhere, and adding 0 leaves a sum
    as it is). Terms the index never saw add nothing, as in bm25s.
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
    """One term's score in every row (0 where it is absent), read-only."""
    column = np.zeros(rows, dtype=dtype)
    np.add.at(column, indices.astype(np.intp), data)
    column.flags.writeable = False
    return column


def analyze(
    texts: Sequence[str], config: LexicalConfig, stemmer: Stemmer.Stemmer | None = None
) -> list[list[str]]:
    """The terms BM25 sees in each text: bm25s' token pattern, lower-casing, ``config``'s
    stopwords and stemmer.

    The one analysis of the lexical tier, shared by the embedded bm25s index and the BM25 sparse
    vectors (:mod:`ragtiller.pinecone.sparse_bm25`), so both count the same terms. It is
    bm25s' ``tokenize`` without its progress bars: a tqdm bar, even a disabled one, creates a
    multiprocessing lock on first use, a blocking call that the LangGraph server refuses on its
    event loop (and that left tqdm's class lock held when refused).

    Args:
        texts: Texts to analyse.
        config: Stopwords and stemmer to apply.
        stemmer: A ready ``Stemmer.Stemmer`` for ``config.stemmer`` (saves building one per call).

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
    """A text's tokens before stemming: bm25s' token pattern, lower-cased, less ``config``'s
    stopwords (the one split :func:`analyze` and :meth:`LexicalTier.term_set` share)."""
    stop = frozenset(bm25s.tokenization._infer_stopwords(config.stopwords or []))
    find = re.compile(_TOKEN_PATTERN).findall
    return lambda text: [t for t in find(text.lower()) if t not in stop]


def lucene_idf(df: float, n: float) -> float:
    """Lucene's IDF of a term found in ``df`` of ``n`` texts: ``log(1 + (n - df + 0.5) / (df + 0.5))``.

    Example:
        >>> round(lucene_idf(1, 10), 3)
        1.992
    """
    return math.log(1.0 + (n - df + 0.5) / (df + 0.5))


def lexical_text(text: str, title: str | None) -> str:
    """The text a chunk is indexed under: its document title, a space, the chunk text.

    BEIR baselines index ``title + " " + text``; a chunk without a title is its text.

    Example:
        >>> lexical_text("Run make.", "Setup")
        'Setup Run make.'
    """
    return f"{title} {text}" if title else text


HEADER_KEY = "header"
"""Chunk metadata: the context header ingest chose (``chunking.header``), when not the title."""


def indexed_text(text: str, metadata: Mapping[str, Any]) -> str:
    """The text a stored chunk is embedded and BM25-indexed under, from its record alone.

    Its ``header`` metadata when ingest set one (``chunking.header: path``), else its title,
    then the text (:func:`lexical_text`). Every backend that indexes a chunk calls this, so
    the embedded tiers and Pinecone index the same text.

    Example:
        >>> indexed_text("Prices rose.", {"title": None, "header": "Oil crisis / Effects"})
        'Oil crisis / Effects Prices rose.'
    """
    return lexical_text(text, metadata.get(HEADER_KEY) or metadata.get("title"))
