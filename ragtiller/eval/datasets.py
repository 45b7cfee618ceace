"""Evaluation datasets: queries, graded qrels, optional slice labels, a content hash; the
folder's layout tells a BEIR collection from a passage-level QA one (``docs/`` and
``<split>.jsonl`` questions, scored by the answer-hit rule of ``squad-dev/README.md``: a
passage holds an answer when, normalized, it contains one at word boundaries, or anywhere for an
answer not at word boundaries in its own gold passage, as SQuAD cuts a few spans mid-word)."""

from __future__ import annotations

import csv
import hashlib
import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path, PurePosixPath
from typing import Any, Literal

import numpy as np
import yaml

from ragtiller.errors import EvalError
from ragtiller.ingest.sources import SUFFIX_FORMATS
from ragtiller.policies.evidence import OVERALL_SLICE

DOCS_DIR = "docs"
DEFAULT_QA_SPLIT = "questions"


def normalize(text: str) -> str:
    """Lower-cased, whitespace runs collapsed to one space, stripped."""
    return " ".join(text.lower().split())


@lru_cache(maxsize=16384)
def _bounded(answer: str) -> re.Pattern[str]:
    return re.compile(rf"(?<!\w){re.escape(answer)}(?!\w)")


@dataclass(frozen=True)
class Answers:
    """One question's normalized answers: matched at word boundaries, or anywhere."""

    bounded: tuple[str, ...]
    anywhere: tuple[str, ...] = ()

    def held_by(self, text: str) -> bool:
        flat = normalize(text)
        if any(answer in flat for answer in self.anywhere):
            return True
        return any(_bounded(answer).search(flat) for answer in self.bounded if answer in flat)


def answers_for(answers: Iterable[str], *, gold_passage: str | None) -> Answers:
    """Normalize ``answers`` (empty ones dropped) and split them by how they match."""
    flat_gold = None if gold_passage is None else normalize(gold_passage)
    bounded: list[str] = []
    anywhere: list[str] = []
    for answer in dict.fromkeys(normalize(a) for a in answers):
        if answer:
            cut = flat_gold is not None and not _bounded(answer).search(flat_gold)
            (anywhere if cut else bounded).append(answer)
    return Answers(tuple(bounded), tuple(anywhere))


@dataclass(frozen=True)
class Question:
    id: str
    text: str
    answers: Answers
    doc: str


def document_names(docs: Path) -> list[str]:
    """Paths under ``docs`` (posix, relative) of the files ``ragtiller ingest`` would read."""
    files = sorted(f for f in docs.rglob("*") if f.is_file() and f.suffix.lower() in SUFFIX_FORMATS)
    rels = [file.relative_to(docs) for file in files]
    return [rel.as_posix() for rel in rels if not any(p.startswith(".") for p in rel.parts)]


def read_questions(path: Path, documents: Sequence[str]) -> list[Question]:
    """Read a questions file, each ``doc`` checked against the dataset's documents."""
    known = set(documents)
    questions: dict[str, Question] = {}
    for where, row in _jsonl(path):
        question = _question(row, where)
        if question.doc not in known:
            raise EvalError(f"{where}: doc {question.doc!r} is not a file under {DOCS_DIR}/")
        if question.id in questions:
            raise EvalError(f"{where}: question id {question.id!r} repeats")
        questions[question.id] = question
    if not questions:
        raise EvalError(f"{path}: holds no question")
    return list(questions.values())


def _question(row: object, where: str) -> Question:
    if not isinstance(row, dict):
        raise EvalError(f"{where}: expected a JSON object")
    qid, text, doc, passage = row.get("id"), row.get("question"), row.get("doc"), row.get("passage")
    answers = row.get("answers")
    if not isinstance(qid, str | int) or not isinstance(text, str) or not text.strip():
        raise EvalError(f"{where}: expected an 'id' and a non-empty 'question'")
    if not isinstance(doc, str) or not doc:
        raise EvalError(f"{where}: expected 'doc', the answering file's path under {DOCS_DIR}/")
    if not isinstance(answers, list) or not all(isinstance(a, str) for a in answers):
        raise EvalError(f"{where}: 'answers' must be a list of strings")
    if passage is not None and not isinstance(passage, str):
        raise EvalError(f"{where}: 'passage' must be a string")
    matched = answers_for(answers, gold_passage=passage)
    if not matched.bounded and not matched.anywhere:
        raise EvalError(f"{where}: question {qid!r} has no non-empty answer")
    return Question(str(qid), text, matched, doc)


def document_key(doc_id: str, names: Mapping[str, None] | frozenset[str]) -> str:
    """The dataset document an index ``doc_id`` names (``ingest docs/`` names a file ``a.md``,
    an ingest of the dataset folder ``docs/a.md``), or ``doc_id`` itself when none."""
    parts = PurePosixPath(doc_id).parts
    for start in range(len(parts)):
        candidate = "/".join(parts[start:])
        if candidate in names and (start == 0 or parts[start - 1] == DOCS_DIR):
            return candidate
    return doc_id


Qrels = Mapping[str, Mapping[str, int]]  # query id -> corpus id -> grade (> 0: relevant)
OVERALL = OVERALL_SLICE  # the reserved slice of every query, ``all``
DatasetKind = Literal["documents", "passages"]


@dataclass(frozen=True)
class EvalDataset:
    """The queries of one split of a collection, with their judgments (a QA question's: its
    gold document); ``labels`` is None when the slices are the routes the router chose."""

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
        return self.path / "corpus.jsonl"

    def document_key(self, doc_id: str) -> str:
        """The dataset's id for an index document (QA: its path under ``docs/``)."""
        return doc_id if self.kind == "documents" else document_key(doc_id, self.documents)

    def subset(self, query_ids: Iterable[str], *, label: str) -> EvalDataset:
        """The dataset restricted to ``query_ids``, hashed so it is never taken for the split."""
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
        """Seeded ``tune`` and ``heldout`` halves, so a tuned figure is not fitted to its queries."""
        ids = list(self.queries)
        order = np.random.default_rng(seed).permutation(len(ids))
        cut = (len(ids) + 1) // 2
        return (
            self.subset([ids[i] for i in order[:cut]], label=f"tune-seed{seed}"),
            self.subset([ids[i] for i in order[cut:]], label=f"heldout-seed{seed}"),
        )


def load_dataset(
    path: str | Path, *, split: str | None = None, slices: str | Path | None = None
) -> EvalDataset:
    """Load either kind of dataset (see :func:`dataset_kind`); ``split`` defaults by kind."""
    if dataset_kind(path) == "documents":
        dataset = load_beir(path, split=split or "test", slices=slices)
    else:
        dataset = load_qa(path, split=split or DEFAULT_QA_SPLIT, slices=slices)
    if not dataset.queries:  # every metric would be an empty table, and the run "pass"
        raise EvalError(f"dataset {path}, split {dataset.split}: no judged query to evaluate")
    return dataset


def dataset_kind(path: str | Path) -> DatasetKind:
    """The kind of dataset the folder holds; both layouts or neither is refused, as guessing
    would score the wrong thing."""
    root = Path(path)
    if not root.is_dir():
        raise EvalError(f"no dataset folder at {root}")
    beir = [m for m in ("corpus.jsonl", "qrels") if (root / m).exists()]
    qa = (root / DOCS_DIR).is_dir()
    if beir and qa:
        raise EvalError(
            f"dataset {root} holds both a BEIR collection ({', '.join(beir)}) and a "
            f"{DOCS_DIR}/ folder (a QA collection); give a folder with one layout"
        )
    if beir or qa:
        return "documents" if beir else "passages"
    found = ", ".join(sorted(p.name + ("/" if p.is_dir() else "") for p in root.iterdir()))
    raise EvalError(
        f"dataset {root} matches no layout: a BEIR collection has corpus.jsonl, "
        f"queries.jsonl and qrels/<split>.tsv; a QA collection has {DOCS_DIR}/ and "
        f"<split>.jsonl questions with answers (found: {found or 'nothing'})"
    )


def load_beir(
    path: str | Path, *, split: str = "test", slices: str | Path | None = None
) -> EvalDataset:
    """Load one split of a BEIR collection; the hash covers every file read."""
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
    files = {
        "corpus.jsonl": corpus,
        "queries.jsonl": queries_file,
        f"qrels/{split}.tsv": qrels_file,
    }
    return EvalDataset(
        name=root.resolve().name,
        path=root,
        split=split,
        queries={qid: texts[qid] for qid in qrels},
        qrels=qrels,
        labels=read_labels(slices, qrels),
        sha256=dataset_sha256([*files.values(), *([Path(slices)] if slices is not None else [])]),
        documents=frozenset(doc for grades in qrels.values() for doc in grades),
        files={name: (file,) for name, file in files.items()},
    )


def load_qa(
    path: str | Path, *, split: str = DEFAULT_QA_SPLIT, slices: str | Path | None = None
) -> EvalDataset:
    """Load a passage-level QA collection; the hash covers every file read."""
    root = Path(path)
    docs_dir, questions_file = root / DOCS_DIR, root / f"{split}.jsonl"
    if not questions_file.is_file():
        others = sorted(p.name for p in root.glob("*.jsonl"))
        hint = f"; questions files here: {', '.join(others)}" if others else ""
        raise EvalError(f"QA dataset {root}: missing {questions_file.name}{hint}")
    names = document_names(docs_dir)
    if not names:
        raise EvalError(f"QA dataset {root}: {DOCS_DIR}/ holds no .md, .rst or .txt document")
    questions = read_questions(questions_file, names)
    docs = tuple(docs_dir / name for name in names)
    return EvalDataset(
        name=root.resolve().name,
        path=root,
        split=split,
        queries={q.id: q.text for q in questions},
        qrels={q.id: {q.doc: 1} for q in questions},
        labels=read_labels(slices, [q.id for q in questions]),
        sha256=dataset_sha256(
            [questions_file, *docs, *([Path(slices)] if slices is not None else [])]
        ),
        kind="passages",
        answers={q.id: q.answers for q in questions},
        documents=frozenset(names),
        files={questions_file.name: (questions_file,), f"{DOCS_DIR}/": docs},
    )


def read_labels(slices: str | Path | None, query_ids: Iterable[str]) -> dict[str, str] | None:
    """Query id -> slice for ``query_ids`` from a mapping file (``unlabelled`` when unnamed)."""
    if slices is None:
        return None
    labels = load_slice_labels(slices)
    if OVERALL in labels.values():
        raise EvalError(f"{slices}: slice name {OVERALL!r} is reserved for the overall metrics")
    return {qid: labels.get(qid, "unlabelled") for qid in query_ids}


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
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


def _jsonl(path: Path) -> Iterator[tuple[str, Any]]:
    """Each non-blank line's ``path:line`` and JSON value."""
    with path.open(encoding="utf-8") as f:
        for line_no, line in enumerate(f, start=1):
            if line.strip():
                try:
                    yield f"{path}:{line_no}", json.loads(line)
                except json.JSONDecodeError as e:
                    raise EvalError(f"{path}:{line_no}: not valid JSON: {e.msg}") from e


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    for where, row in _jsonl(path):
        if not isinstance(row, dict) or "_id" not in row:
            raise EvalError(f"{where}: expected a JSON object with an '_id'")
        yield row


def load_slice_labels(path: str | Path) -> dict[str, str]:
    """Read a query-id -> slice mapping: a JSON object, or a TSV ``query-id<TAB>slice``."""
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
    """sha256 over each file's name, size and bytes (so moving bytes between files changes it)."""
    digest = hashlib.sha256()
    for file in files:
        digest.update(f"{file.name}\0{file.stat().st_size}\0".encode())
        with file.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


@dataclass(frozen=True)
class DatasetEntry:
    dataset: Path
    index: Path
    split: str | None = None
    slices: Path | None = None
    top_k: int | None = None


_ENTRY_KEYS = {"dataset", "index", "split", "slices", "top_k"}


def read_dataset_list(path: str | Path) -> list[DatasetEntry]:
    """Read the YAML list ``tune --datasets`` takes; paths are relative to its folder."""
    file = Path(path)
    try:
        data = yaml.safe_load(file.read_text("utf-8"))
    except (OSError, yaml.YAMLError) as e:
        raise EvalError(f"dataset list {file}: {e}") from e
    if not isinstance(data, list) or not data:
        raise EvalError(f"dataset list {file}: expected a YAML list of {{dataset, index}} entries")
    entries = []
    for n, item in enumerate(data, start=1):
        where = f"dataset list {file}, entry {n}"
        if not isinstance(item, dict) or not {"dataset", "index"} <= item.keys():
            raise EvalError(f"{where}: expected a mapping with 'dataset' and 'index'")
        unknown = sorted(set(map(str, item)) - _ENTRY_KEYS)
        if unknown:
            raise EvalError(f"{where}: unknown key(s) {unknown}; known: {sorted(_ENTRY_KEYS)}")
        top_k = item.pop("top_k", None)
        if top_k is not None and (type(top_k) is not int or top_k <= 0):
            raise EvalError(f"{where}: top_k must be a positive integer, got {top_k!r}")
        if not all(isinstance(v, str) for v in item.values()):
            raise EvalError(f"{where}: dataset, index, split and slices must be strings")
        root = file.parent
        slices = root / item["slices"] if "slices" in item else None
        entries.append(
            DatasetEntry(
                root / item["dataset"], root / item["index"], item.get("split"), slices, top_k
            )
        )
    return entries
