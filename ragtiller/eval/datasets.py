"""Evaluation datasets: queries, graded qrels, optional slice labels, a content hash.

Two kinds share :class:`EvalDataset`: ``documents`` (a BEIR collection, judged by qrels) and
``passages`` (a QA collection, judged by answer strings; see :mod:`ragtiller.eval.qa`).
"""

from __future__ import annotations

import csv
import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np

from ragtiller.errors import EvalError
from ragtiller.eval.qa import Answers, document_key
from ragtiller.policies.evidence import OVERALL_SLICE

Qrels = Mapping[str, Mapping[str, int]]
"""Query id -> corpus id -> graded relevance (``> 0`` is relevant; higher is better)."""

OVERALL = OVERALL_SLICE
"""Reserved slice name for metrics over every query (the artifacts' ``all``)."""

DatasetKind = Literal["documents", "passages"]
"""``documents``: a BEIR collection judged per document; ``passages``: a QA collection judged
by whether a returned passage holds an answer."""


@dataclass(frozen=True)
class EvalDataset:
    """The queries of one split of a collection, with their judgments.

    For a BEIR collection only queries that appear in the split's qrels file are part of the
    split (the BEIR convention: ``queries.jsonl`` may hold the queries of every split). For a
    QA collection the split is a questions file, and each question's qrels are its gold
    document (grade 1), so document metrics judge the article and answer metrics the passage.

    Attributes:
        name: The dataset folder's name.
        path: The dataset folder.
        split: The qrels split (``qrels/<split>.tsv``), or the questions file's stem.
        queries: Query id -> query text, in file order.
        qrels: Query id -> document id -> grade.
        labels: Query id -> slice label, from a mapping file; None: slices are the routes the
            router chose.
        sha256: Hash of the files that define the split (see :func:`dataset_sha256`).
        kind: ``documents`` or ``passages``.
        answers: Query id -> its answers (``passages`` only).
        documents: The collection's document ids: the judged ones of a BEIR split, or the
            files under a QA collection's ``docs/``.
        files: Name -> the files it covers, for the fingerprint (``docs/``: every document).

    Example:
        >>> ds = load_beir("tests/data/tiny_beir")  # doctest: +SKIP
        >>> ds.qrels["q1"]["d1"]  # doctest: +SKIP
        2
    """

    name: str
    path: Path
    split: str
    queries: Mapping[str, str]
    qrels: Qrels
    labels: Mapping[str, str] | None
    sha256: str
    kind: DatasetKind = "documents"
    answers: Mapping[str, Answers] | None = None
    documents: frozenset[str] = frozenset()
    files: Mapping[str, tuple[Path, ...]] = field(default_factory=dict)

    @property
    def corpus_path(self) -> Path:
        """The collection's ``corpus.jsonl`` (a BEIR collection's corpus)."""
        return self.path / "corpus.jsonl"

    def document_key(self, doc_id: str) -> str:
        """The dataset's id for an index document (QA: its path under ``docs/``)."""
        if self.kind == "documents":
            return doc_id
        return document_key(doc_id, self.documents)

    def subset(self, query_ids: Iterable[str], *, label: str) -> EvalDataset:
        """The same dataset restricted to ``query_ids`` (kept in dataset order).

        The hash covers the parent hash, ``label`` and the ids, so a subset is never mistaken
        for the whole split.

        Raises:
            EvalError: An id is not a query of this split.
        """
        wanted = set(query_ids)
        unknown = sorted(wanted - set(self.queries))
        if unknown:
            raise EvalError(f"not queries of {self.name}/{self.split}: {', '.join(unknown[:5])}")
        kept = [qid for qid in self.queries if qid in wanted]
        digest = hashlib.sha256("\0".join([self.sha256, label, *kept]).encode()).hexdigest()
        return replace(
            self,
            name=f"{self.name}[{label}]",
            queries={qid: self.queries[qid] for qid in kept},
            qrels={qid: self.qrels[qid] for qid in kept},
            labels=None if self.labels is None else {qid: self.labels[qid] for qid in kept},
            answers=None if self.answers is None else {qid: self.answers[qid] for qid in kept},
            sha256=digest,
        )

    def split_halves(self, *, seed: int) -> tuple[EvalDataset, EvalDataset]:
        """A seeded random split into ``tune`` and ``heldout`` halves (tune gets the odd one).

        Tune choices (weights, depths) on the first half and report the second, so a number
        quoted for a tuned policy was not fitted to the queries it is measured on.
        """
        ids = list(self.queries)
        order = np.random.default_rng(seed).permutation(len(ids))
        cut = (len(ids) + 1) // 2
        tune = [ids[i] for i in order[:cut]]
        return (
            self.subset(tune, label=f"tune-seed{seed}"),
            self.subset([ids[i] for i in order[cut:]], label=f"heldout-seed{seed}"),
        )


def load_beir(
    path: str | Path,
    *,
    split: str = "test",
    slices: str | Path | None = None,
) -> EvalDataset:
    """Load one split of a BEIR-format collection.

    Args:
        path: Folder holding ``corpus.jsonl``, ``queries.jsonl`` and ``qrels/<split>.tsv``.
        split: The qrels split.
        slices: Optional query-id -> slice mapping file (see :func:`load_slice_labels`). Queries
            it does not name get the slice ``unlabelled``.

    Returns:
        The dataset; its hash covers the corpus, queries, qrels and slice files.

    Raises:
        EvalError: A file is missing or malformed, or a qrel names an unknown query.
    """
    root = Path(path)
    corpus, queries_file = root / "corpus.jsonl", root / "queries.jsonl"
    qrels_file = root / "qrels" / f"{split}.tsv"
    for file in (corpus, queries_file, qrels_file):
        if not file.is_file():
            raise EvalError(f"BEIR dataset {root}: missing {file.relative_to(root)}")
    qrels = read_qrels(qrels_file)
    texts = {str(row["_id"]): str(row.get("text", "")) for row in read_jsonl(queries_file)}
    unknown = [qid for qid in qrels if qid not in texts]
    if unknown:
        raise EvalError(f"{qrels_file}: query ids not in queries.jsonl: {', '.join(unknown[:5])}")
    labels = read_labels(slices, qrels)
    files = [corpus, queries_file, qrels_file, *([Path(slices)] if slices is not None else [])]
    return EvalDataset(
        name=root.resolve().name,
        path=root,
        split=split,
        queries={qid: texts[qid] for qid in qrels},
        qrels=qrels,
        labels=labels,
        sha256=dataset_sha256(files),
        documents=frozenset(doc for grades in qrels.values() for doc in grades),
        files={
            "corpus.jsonl": (corpus,),
            "queries.jsonl": (queries_file,),
            f"qrels/{split}.tsv": (qrels_file,),
        },
    )


def read_labels(slices: str | Path | None, query_ids: Iterable[str]) -> dict[str, str] | None:
    """Query id -> slice for ``query_ids`` from a mapping file (``unlabelled`` when unnamed).

    Raises:
        EvalError: The file is malformed or uses the reserved slice name ``all``.
    """
    if slices is None:
        return None
    labels = load_slice_labels(slices)
    if OVERALL in labels.values():
        raise EvalError(f"{slices}: slice name {OVERALL!r} is reserved for the overall metrics")
    return {qid: labels.get(qid, "unlabelled") for qid in query_ids}


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    """Read a BEIR qrels TSV (header ``query-id corpus-id score``), keeping file order.

    Raises:
        EvalError: A row is short or its score is not an integer.
    """
    qrels: dict[str, dict[str, int]] = {}
    with path.open(encoding="utf-8", newline="") as f:
        rows = csv.reader(f, delimiter="\t")
        header = next(rows, None)
        if header is None or [h.strip() for h in header[:3]] != ["query-id", "corpus-id", "score"]:
            raise EvalError(f"{path}: expected the header 'query-id<TAB>corpus-id<TAB>score'")
        for line, row in enumerate(rows, start=2):
            if not row:
                continue
            if len(row) < 3:
                raise EvalError(f"{path}:{line}: expected 3 tab-separated fields, got {row!r}")
            try:
                grade = int(row[2])
            except ValueError as e:
                raise EvalError(f"{path}:{line}: score must be an integer, got {row[2]!r}") from e
            qrels.setdefault(row[0], {})[row[1]] = grade
    return qrels


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """Yield each JSON object of a JSON-lines file.

    Raises:
        EvalError: A line is not a JSON object with an ``_id``.
    """
    with path.open(encoding="utf-8") as f:
        for line_no, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise EvalError(f"{path}:{line_no}: not valid JSON: {e.msg}") from e
            if not isinstance(row, dict) or "_id" not in row:
                raise EvalError(f"{path}:{line_no}: expected a JSON object with an '_id'")
            yield row


def load_slice_labels(path: str | Path) -> dict[str, str]:
    """Read a query-id -> slice mapping: a JSON object, or a TSV ``query-id<TAB>slice``.

    A TSV may start with a header row whose first field is ``query-id``.

    Raises:
        EvalError: The file is missing or malformed.
    """
    file = Path(path)
    try:
        text = file.read_text("utf-8")
    except OSError as e:
        raise EvalError(f"cannot read slice file {file}: {e.strerror or e}") from e
    if file.suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise EvalError(f"{file}: not valid JSON: {e.msg}") from e
        if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
            raise EvalError(f"{file}: expected a JSON object mapping query id to slice name")
        return {str(k): v for k, v in data.items()}
    labels: dict[str, str] = {}
    for line_no, row in enumerate(csv.reader(text.splitlines(), delimiter="\t"), start=1):
        if not row or (line_no == 1 and row[0].strip() == "query-id"):
            continue
        if len(row) < 2 or not row[1].strip():
            raise EvalError(f"{file}:{line_no}: expected 'query-id<TAB>slice', got {row!r}")
        labels[row[0].strip()] = row[1].strip()
    return labels


def dataset_sha256(files: Sequence[Path]) -> str:
    """sha256 over each file's name, size and bytes, in the given order.

    Names and sizes are hashed too, so moving bytes between files changes the hash.
    """
    digest = hashlib.sha256()
    for file in files:
        digest.update(f"{file.name}\0{file.stat().st_size}\0".encode())
        with file.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()
