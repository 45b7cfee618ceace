"""BM25 as sparse vectors (documents carry ``tfc(tf, dl, avgdl)``, queries ``count x idf``:
their dot product is BM25), and the statistics they share, kept in a reserved namespace of the
index so every replica reads the same; parts first, then the header: a reader never sees a mix.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Annotated, Any

import Stemmer
from pydantic import BaseModel, ConfigDict, Field
from typing_extensions import TypedDict

from ragtiller.errors import ConfigurationError
from ragtiller.index.lexical import LexicalConfig, analyze

RESERVED_NAMESPACE_PREFIX = "__ragtiller"
"""Namespaces ragtiller keeps for itself (the BM25 statistics); never searched as a route's."""
SPARSE_METHODS = ("lucene", "robertson", "atire")
"""BM25 variants a dot product reproduces (bm25l and bm25+ score documents without the term)."""
IDF: dict[str, Callable[[int, int], float]] = {
    "lucene": lambda df, n: math.log(1 + (n - df + 0.5) / (df + 0.5)),
    "robertson": lambda df, n: math.log(max(1.0, (n - df + 0.5) / (df + 0.5))),
    "atire": lambda df, n: math.log(n / df),
}
STATS_NAMESPACE = f"{RESERVED_NAMESPACE_PREFIX}_bm25_stats"
HEADER_ID = "bm25-stats"
PART_BYTES = 24_000
"""Term-table JSON per part record, in bytes (escaped, it stays under Pinecone's 40 KB)."""
FETCH_BATCH = 100  # ids per fetch request (they travel in the URL)
_MARKER = {"indices": [0], "values": [1.0]}  # a sparse index's every record has sparse values


class SparseVector(TypedDict):
    """A sparse vector as Pinecone takes it: parallel lists, indices unique."""

    indices: list[int]
    values: list[float]


def _check_method(config: LexicalConfig) -> None:
    if config.method not in SPARSE_METHODS:
        raise ConfigurationError(
            f"BM25 method {config.method!r} has no sparse-vector form (it scores documents "
            f"without the query terms too); use one of {', '.join(SPARSE_METHODS)}"
        )


class BM25Stats(BaseModel):
    """Corpus statistics: ``terms`` maps each analysed term to ``[sparse index, document
    frequency]``; a term's index is a hash of it (the next free one on a collision), so two
    corpora give most terms the same index."""

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
        """Count ``texts``, the indexed text of every chunk."""
        _check_method(config)
        tokens = analyze(texts, config)
        df: Counter[str] = Counter()
        for doc in tokens:
            df.update(set(doc))
        terms: dict[str, tuple[int, int]] = {}
        taken: set[int] = set()
        for term in sorted(df):  # sorted: the same corpus gives the same indices everywhere
            index = int.from_bytes(hashlib.blake2b(term.encode(), digest_size=4).digest(), "big")
            while index in taken:
                index = (index + 1) % 2**32  # Pinecone's sparse indices are unsigned 32-bit
            taken.add(index)
            terms[term] = (index, df[term])
        total = sum(len(doc) for doc in tokens)
        return cls(lexical=config, documents=len(tokens), total_length=total, terms=terms)


class BM25SparseEncoder:
    """Documents and queries as BM25 sparse vectors, with one set of statistics.

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
        self._stemmer = Stemmer.Stemmer(stats.lexical.stemmer) if stats.lexical.stemmer else None
        self._idf = IDF[stats.lexical.method]

    def encode_documents(self, texts: Sequence[str]) -> list[SparseVector]:
        """Per document, each known term's ``tfc``; no terms: empty lists."""
        config, stats = self.stats.lexical, self.stats
        vectors: list[SparseVector] = []
        for doc in analyze(texts, config, self._stemmer):
            counts = Counter(t for t in doc if t in stats.terms)
            norm = config.k1 * (1 - config.b + config.b * len(doc) / stats.avgdl)
            scale = config.k1 + 1 if config.method == "atire" else 1.0
            pairs = sorted((stats.terms[t][0], scale * n / (n + norm)) for t, n in counts.items())
            vectors.append(_vector(pairs))
        return vectors

    def encode_query(self, text: str) -> SparseVector:
        """Each known query term's ``count x idf``, terms of IDF 0 dropped (as bm25s does)."""
        stats = self.stats
        terms = analyze([text], stats.lexical, self._stemmer)[0]
        counts = Counter(t for t in terms if t in stats.terms)
        weighted = (
            (stats.terms[t][0], n * self._idf(stats.terms[t][1], stats.documents))
            for t, n in counts.items()
        )
        return _vector(sorted((i, w) for i, w in weighted if w > 0))


def _vector(pairs: list[tuple[int, float]]) -> SparseVector:
    return SparseVector(indices=[i for i, _ in pairs], values=[v for _, v in pairs])


def write_stats(index: Any, stats: BM25Stats) -> str:
    """Store ``stats``, make them current (parts, then header), return their version."""
    version = hashlib.sha256(stats.model_dump_json().encode()).hexdigest()[:16]
    old = _fetch(index, [HEADER_ID]).get(HEADER_ID)
    parts: list[str] = []
    entries: list[str] = []
    size = 0
    for term, (term_index, df) in stats.terms.items():
        entry = json.dumps([term, term_index, df], ensure_ascii=False)
        if entries and size + len(entry.encode()) > PART_BYTES:
            parts.append(f"[{','.join(entries)}]")
            entries, size = [], 0
        entries.append(entry)
        size += len(entry.encode()) + 1
    parts.append(f"[{','.join(entries)}]")
    records = [
        {"id": _part_id(version, i), "sparse_values": _MARKER, "metadata": {"terms": part}}
        for i, part in enumerate(parts)
    ]
    for first in range(0, len(records), FETCH_BATCH):
        index.upsert(vectors=records[first : first + FETCH_BATCH], namespace=STATS_NAMESPACE)
    summary = json.dumps(stats.model_dump(exclude={"terms"}))
    metadata = {"version": version, "parts": len(parts), "summary": summary}
    header = {"id": HEADER_ID, "sparse_values": _MARKER, "metadata": metadata}
    index.upsert(vectors=[header], namespace=STATS_NAMESPACE)
    if old is not None and old["version"] != version:
        stale = [_part_id(str(old["version"]), i) for i in range(int(old["parts"]))]
        for first in range(0, len(stale), FETCH_BATCH):
            index.delete(ids=stale[first : first + FETCH_BATCH], namespace=STATS_NAMESPACE)
    return version


def read_version(index: Any) -> str | None:
    """The version of the current statistics, or None when the index holds none (one fetch)."""
    header = _fetch(index, [HEADER_ID]).get(HEADER_ID)
    return None if header is None else str(header["version"])


def read_stats(index: Any) -> tuple[str, BM25Stats] | None:
    """The current statistics and version, or None; a part missing is a ``ValueError``."""
    meta = _fetch(index, [HEADER_ID]).get(HEADER_ID)
    if meta is None:
        return None
    version = str(meta["version"])
    ids = [_part_id(version, i) for i in range(int(meta["parts"]))]
    parts = _fetch(index, ids)
    missing = [i for i in ids if i not in parts]
    if missing:
        raise ValueError(
            f"BM25 statistics {version} in namespace {STATS_NAMESPACE!r} lack parts {missing[:3]}; "
            "upsert the lexical index again (upsert_lexical)"
        )
    terms = {
        term: (int(term_index), int(df))
        for record_id in ids
        for term, term_index, df in json.loads(parts[record_id]["terms"])
    }
    return version, BM25Stats.model_validate({**json.loads(meta["summary"]), "terms": terms})


def _fetch(index: Any, ids: list[str]) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for first in range(0, len(ids), FETCH_BATCH):
        response = index.fetch(ids=ids[first : first + FETCH_BATCH], namespace=STATS_NAMESPACE)
        found |= {record_id: dict(v.metadata or {}) for record_id, v in response.vectors.items()}
    return found


def _part_id(version: str, part: int) -> str:
    return f"bm25-stats-{version}-{part:05d}"
