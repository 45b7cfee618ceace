"""Documents vote with whole paragraphs, not with the pieces ingest cut them into.

Ingest cuts a paragraph longer than ``chunk_tokens`` words into overlapping passages. Where it
cuts depends on that setting, not on the text, so a document whose one long paragraph became two
passages is scored by half of its text while a shorter one is scored whole. With
``fusion.document_unit: paragraph`` each tier scores the **unit** a passage belongs to, the
passages cut from one paragraph taken together (BM25 over the unit's text, the cosine of the
mean of its passage vectors for the dense tier); the units' scores are fused as passages are,
and a document ranks by its best unit. Passages are still what a turn returns and how they are
ordered within a document. A unit is recovered from the stored offsets, so no re-ingest is
needed: consecutive passages of a section are one unit when they overlap or when no paragraph
break (:func:`ragtiller.index.units.paragraph_break`, ingest's own rule) separates them.
``section`` takes each section whole instead.
"""

from __future__ import annotations

import itertools
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from ragtiller.core.tiers import Hit, SearchRequest, Tier, wrapper_chain
from ragtiller.index.compute import CpuTier
from ragtiller.index.dense import DenseTier, NumpyVectorStore
from ragtiller.index.lexical import DEFAULT_LEXICAL, LexicalTier, indexed_text
from ragtiller.index.records import RecordTable
from ragtiller.index.units import paragraph_break, wrap_width
from ragtiller.models.batch_embedding import normalize_rows
from ragtiller.ranking.documents import DocKey, doc_key
from ragtiller.ranking.fusion import DEFAULT_MARGIN, FusionMethod, fused_order

DocumentUnit = Literal["passage", "paragraph", "section"]
UNIT_ID = "unit_id"
"""``metadata[UNIT_ID]`` of a passage hit: the id of the unit it belongs to."""
UNIT_SCORE = "unit_score"
"""``metadata[UNIT_SCORE]`` of a passage hit: its tier's score of the passage's whole unit."""


@dataclass(frozen=True)
class Units:
    """The units of one index's passages (row-aligned with its chunk table).

    Attributes:
        of_row: The unit position of each chunk row.
        ids: Unit ids, by position (a unit's id is its first passage's id).
        lexical: BM25 over the units' indexed texts (header or title, then the unit text).
        centroids: Each unit's mean passage vector, normalised, by position.
    """

    of_row: npt.NDArray[np.intp]
    ids: list[str]
    lexical: LexicalTier
    centroids: npt.NDArray[np.float32]

    def vectors_of_rows(self, rows: list[int]) -> npt.NDArray[np.float32]:
        """The centroid of each chunk row's unit (Rocchio's ``dense_vectors: paragraph``)."""
        return self.centroids[self.of_row[rows]]


_UNITS: weakref.WeakKeyDictionary[Any, dict[str, tuple[Any, Units]]] = weakref.WeakKeyDictionary()


def index_units(index: Any, mode: DocumentUnit) -> Units:
    """The units of ``index`` (an embedded index: chunk table, vectors, parents), built once."""
    store: NumpyVectorStore = index.store
    records = store.records  # replaced whenever the store's rows change
    held = _UNITS.setdefault(index, {}).get(mode)
    if held is not None and held[0] is records:
        return held[1]
    units = _build_units(records, store.vectors, index.parents, mode, index)
    _UNITS[index][mode] = (records, units)
    return units


def _build_units(
    records: RecordTable,
    vectors: npt.NDArray[np.float32],
    parents: RecordTable,
    mode: DocumentUnit,
    index: Any,
) -> Units:
    section_text = dict(zip(parents.ids, parents.texts, strict=True))
    by_section: dict[str, list[int]] = {}
    for row, md in enumerate(records.metadatas):
        by_section.setdefault(str(md.get("parent_id") or records.ids[row]), []).append(row)
    of_row = np.empty(len(records), dtype=np.intp)
    ids: list[str] = []
    texts: list[str] = []
    first_rows: list[int] = []
    for section, rows in by_section.items():
        rows.sort(key=lambda r: int(records.metadatas[r].get("start", 0)))
        text = section_text.get(section)
        for group in _groups(rows, records, text, mode):
            of_row[group] = len(ids)
            ids.append(records.ids[group[0]])
            first_rows.append(group[0])
            texts.append(_unit_text(group, records, text))
    sums = np.zeros((len(ids), vectors.shape[1]), dtype=np.float64)
    np.add.at(sums, of_row, np.asarray(vectors, dtype=np.float64))
    table = RecordTable(ids, texts, [records.metadatas[r] for r in first_rows])
    indexed = [indexed_text(t, table.metadatas[i]) for i, t in enumerate(texts)]
    manifest = getattr(index, "manifest", None)
    config = getattr(manifest, "lexical", None) or DEFAULT_LEXICAL
    lexical = LexicalTier.build(table, indexed, config)
    return Units(of_row, ids, lexical, normalize_rows(sums))


def _groups(
    rows: list[int], records: RecordTable, text: str | None, mode: DocumentUnit
) -> list[list[int]]:
    """A section's rows (in text order) cut into units: runs of pieces of one paragraph."""
    if mode == "section" or text is None:
        return [rows] if mode == "section" else [[r] for r in rows]
    groups: list[list[int]] = [[rows[0]]]
    width = wrap_width(text)
    for previous, row in itertools.pairwise(rows):
        end = int(records.metadatas[previous].get("end", 0))
        start = int(records.metadatas[row].get("start", 0))
        if start <= end or not paragraph_break(text, end, start, width=width):
            groups[-1].append(row)
        else:
            groups.append([row])
    return groups


def _unit_text(group: list[int], records: RecordTable, text: str | None) -> str:
    if len(group) == 1 or text is None:
        return " ".join(records.texts[r] for r in group)
    start = int(records.metadatas[group[0]].get("start", 0))
    end = max(int(records.metadatas[r].get("end", 0)) for r in group)
    return text[start:end]


def _with_units(hits: list[Hit], units: Units, row_of: Mapping[str, int], score: Any) -> list[Hit]:
    out: list[Hit] = []
    for hit in hits:
        row = row_of.get(hit["id"])
        if row is None:  # not a chunk of this index (a parent-child window): no unit vote
            out.append(hit)
            continue
        position = int(units.of_row[row])
        marks = {UNIT_ID: units.ids[position], UNIT_SCORE: float(score(position))}
        out.append({**hit, "metadata": {**hit["metadata"], **marks}})
    return out


class LexicalUnitsTier(CpuTier):
    """A lexical tier's passages, each carrying its unit's id and BM25 (over the units)."""

    needs_vector = False

    def __init__(self, inner: Tier, units: Units, records: RecordTable) -> None:
        self.inner = inner
        self.name = inner.name
        self.units = units
        self.row_of = {id_: row for row, id_ in enumerate(records.ids)}

    @property
    def rows(self) -> int:
        """Rows one search scans (passages and units)."""
        return int(getattr(self.inner, "rows", 0)) + self.units.lexical.rows

    def search(self, request: SearchRequest) -> list[Hit]:
        """``inner``'s hits, in its order, with their units' BM25 (0: no query term)."""
        hits = self.inner.search(request)
        if not hits:
            return hits
        scores = self.units.lexical.row_scores(request)
        return _with_units(hits, self.units, self.row_of, lambda p: scores[p])


class DenseUnitsTier(CpuTier):
    """A dense tier's passages, each carrying its unit's id and centroid cosine.

    Rocchio wraps this tier, so the moved query vector scores the passages and the units; it
    passes ``question`` through and re-scores its candidates here as on a bare dense tier.
    """

    needs_vector = True
    marks_question = True
    """Hits can carry their cosine to the question (``question=``), as a bare dense tier's."""

    def __init__(self, inner: DenseTier, units: Units, store: NumpyVectorStore) -> None:
        self.inner = inner
        self.name = inner.name
        self.units = units
        self.store = store
        self.row_of = {id_: row for row, id_ in enumerate(store.records.ids)}

    @property
    def rows(self) -> int:
        """Rows one search scans."""
        return len(self.store)

    def search(
        self, request: SearchRequest, *, question: Sequence[float] | None = None
    ) -> list[Hit]:
        """``inner``'s hits, in its order, with their units' centroid cosines."""
        return self._unit_scored(request, self.inner.search(request, question=question))

    def rank_scored(
        self,
        request: SearchRequest,
        rows: npt.NDArray[np.intp],
        scores: npt.NDArray[np.float32],
        *,
        question: Sequence[float] | None = None,
    ) -> list[Hit]:
        """``inner``'s best ``k`` of rows already scored, with their units' centroid cosines."""
        hits = self.inner.rank_scored(request, rows, scores, question=question)
        return self._unit_scored(request, hits)

    def _unit_scored(self, request: SearchRequest, hits: list[Hit]) -> list[Hit]:
        if not hits or request.vector is None:
            return hits
        query = normalize_rows(request.vector)[0]
        centroids = self.units.centroids
        return _with_units(hits, self.units, self.row_of, lambda p: centroids[p] @ query)


def with_units(tiers: Sequence[Tier], index: Any, mode: DocumentUnit) -> list[Tier]:
    """``tiers`` with the embedded dense and lexical tiers scoring units beside passages.

    Applies to the tiers of an embedded index only (its vectors, chunk and parent tables);
    other tiers, and every tier when ``mode`` is ``passage``, are returned as they are.
    """
    store: object = getattr(index, "store", None)
    if mode == "passage" or not hasattr(index, "parents"):
        return list(tiers)
    if not isinstance(store, NumpyVectorStore):
        return list(tiers)
    vectors: NumpyVectorStore = store
    records = vectors.records
    units = index_units(index, mode)
    out: list[Tier] = []
    for tier in tiers:
        if isinstance(tier, DenseTier) and tier.store is store:
            out.append(DenseUnitsTier(tier, units, vectors))
        elif not tier.needs_vector and getattr(_innermost(tier), "records", None) is records:
            out.append(LexicalUnitsTier(tier, units, records))  # BM25, or RM3 over it
        else:
            out.append(tier)
    return out


def _innermost(tier: Any) -> Any:
    *_, innermost = wrapper_chain(tier)
    return innermost


def has_unit_votes(hits_by_tier: Mapping[str, Sequence[Hit]]) -> bool:
    """Whether some tier's hits carry unit scores (``document_unit`` paragraph or section)."""
    return any(UNIT_SCORE in h["metadata"] for hits in hits_by_tier.values() for h in hits)


def unit_document_order(
    hits_by_tier: Mapping[str, Sequence[Hit]],
    *,
    method: FusionMethod,
    rrf_k: int,
    weights: Mapping[str, float] | None,
    margin: float = DEFAULT_MARGIN,
) -> list[DocKey]:
    """Documents best first by their best fused unit: each tier's units (best first) fused.

    A hit without a unit (another tier, a window) is its own unit, scored as it is.
    """
    scored: dict[str, dict[str, float]] = {}
    doc_of: dict[str, DocKey] = {}
    for tier, hits in hits_by_tier.items():
        units: dict[str, float] = {}
        for hit in hits:
            md = hit["metadata"]
            unit = str(md.get(UNIT_ID, hit["id"]))
            score = float(md.get(UNIT_SCORE, hit["score"]))
            units[unit] = max(units.get(unit, score), score)
            doc_of.setdefault(unit, doc_key(hit))
        scored[tier] = dict(sorted(units.items(), key=lambda item: -item[1]))
    order = fused_order(scored, method=method, rrf_k=rrf_k, weights=weights, margin=margin)
    return list(dict.fromkeys(doc_of[unit] for unit in order))
