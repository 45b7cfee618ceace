"""Passage-level QA datasets (the ``squad-dev`` layout: ``docs/`` and ``<split>.jsonl``
questions) and the answer-hit rule of ``squad-dev/README.md`` (DPR's top-k accuracy).

A passage holds an answer when, normalized, it contains one at word boundaries; an answer not
at word boundaries in its own gold passage (SQuAD has a few spans cut mid-word) is matched as a
plain substring instead.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path, PurePosixPath

from ragtiller.errors import EvalError
from ragtiller.ingest.sources import SUFFIX_FORMATS

DOCS_DIR = "docs"
DEFAULT_QA_SPLIT = "questions"


def normalize(text: str) -> str:
    """Lower-cased, whitespace runs collapsed to one space, stripped.

    Example:
        >>> normalize("  Super   Bowl\\n50 ")
        'super bowl 50'
    """
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
        """Whether ``text`` holds one of the answers.

        Example:
            >>> answers = answers_for(["Carolina Panthers", "L"], gold_passage="Super Bowl L")
            >>> answers.held_by("The CAROLINA\\n panthers lost"), answers.held_by("Lions")
            (True, False)
        """
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
    with path.open(encoding="utf-8") as f:
        for line_no, line in enumerate(f, start=1):
            if not line.strip():
                continue
            where = f"{path}:{line_no}"
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise EvalError(f"{where}: not valid JSON: {e.msg}") from e
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
    an ingest of the dataset folder ``docs/a.md``), or ``doc_id`` itself when none.

    Example:
        >>> names = frozenset({"a.md", "sub/b.md"})
        >>> [document_key(i, names) for i in ("a.md", "squad/docs/sub/b.md", "x/a.md")]
        ['a.md', 'sub/b.md', 'x/a.md']
    """
    parts = PurePosixPath(doc_id).parts
    for start in range(len(parts)):
        candidate = "/".join(parts[start:])
        if candidate in names and (start == 0 or parts[start - 1] == DOCS_DIR):
            return candidate
    return doc_id
