"""Which kind of dataset a folder holds, told by its layout, and the loader for each kind.

* ``documents`` (BEIR): ``corpus.jsonl``, ``queries.jsonl`` and ``qrels/<split>.tsv``;
  the default split is ``test``.
* ``passages`` (QA, the ``squad-dev`` layout): a ``docs/`` folder and ``<split>.jsonl``
  questions with answers; the default split is ``questions``.

A folder with markers of both, or of neither, is refused: guessing would score the wrong thing.
"""

from __future__ import annotations

from pathlib import Path

from ragtiller.errors import EvalError
from ragtiller.eval.datasets import (
    DatasetKind,
    EvalDataset,
    dataset_sha256,
    load_beir,
    read_labels,
)
from ragtiller.eval.qa import DEFAULT_QA_SPLIT, DOCS_DIR, document_names, read_questions

DEFAULT_BEIR_SPLIT = "test"
_BEIR_MARKERS = ("corpus.jsonl", "qrels")


def dataset_kind(path: str | Path) -> DatasetKind:
    """The kind of dataset the folder holds, by its layout.

    Raises:
        EvalError: ``path`` is not a folder, or it holds both layouts or neither.
    """
    root = Path(path)
    if not root.is_dir():
        raise EvalError(f"no dataset folder at {root}")
    beir = [m for m in _BEIR_MARKERS if (root / m).exists()]
    qa = (root / DOCS_DIR).is_dir()
    if beir and qa:
        raise EvalError(
            f"dataset {root} holds both a BEIR collection ({', '.join(beir)}) and a "
            f"{DOCS_DIR}/ folder (a QA collection); give a folder with one layout"
        )
    if beir:
        return "documents"
    if qa:
        return "passages"
    found = ", ".join(sorted(p.name + ("/" if p.is_dir() else "") for p in root.iterdir()))
    raise EvalError(
        f"dataset {root} matches no layout: a BEIR collection has corpus.jsonl, "
        f"queries.jsonl and qrels/<split>.tsv; a QA collection has {DOCS_DIR}/ and "
        f"<split>.jsonl questions with answers (found: {found or 'nothing'})"
    )


def load_dataset(
    path: str | Path, *, split: str | None = None, slices: str | Path | None = None
) -> EvalDataset:
    """Load either kind of dataset (see :func:`dataset_kind`).

    Args:
        path: The dataset folder.
        split: The qrels split (BEIR) or questions file stem (QA); None: the kind's default.
        slices: Optional query-id -> slice mapping file.

    Raises:
        EvalError: A file is missing or malformed, or the split holds no judged query.
    """
    if dataset_kind(path) == "documents":
        dataset = load_beir(path, split=split or DEFAULT_BEIR_SPLIT, slices=slices)
    else:
        dataset = load_qa(path, split=split or DEFAULT_QA_SPLIT, slices=slices)
    if not dataset.queries:  # every metric would be an empty table, and the run "pass"
        raise EvalError(f"dataset {path}, split {dataset.split}: no judged query to evaluate")
    return dataset


def load_qa(
    path: str | Path, *, split: str = DEFAULT_QA_SPLIT, slices: str | Path | None = None
) -> EvalDataset:
    """Load a passage-level QA collection (see :mod:`ragtiller.eval.qa`).

    Returns:
        The dataset (kind ``passages``); its hash covers the questions file, every document
        under ``docs/`` and the slice file.

    Raises:
        EvalError: The questions file is missing or malformed, or ``docs/`` holds no document.
    """
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
    doc_files = tuple(docs_dir / name for name in names)
    hashed = [questions_file, *doc_files, *([Path(slices)] if slices is not None else [])]
    return EvalDataset(
        name=root.resolve().name,
        path=root,
        split=split,
        queries={q.id: q.text for q in questions},
        qrels={q.id: {q.doc: 1} for q in questions},
        labels=read_labels(slices, [q.id for q in questions]),
        sha256=dataset_sha256(hashed),
        kind="passages",
        answers={q.id: q.answers for q in questions},
        documents=frozenset(names),
        files={questions_file.name: (questions_file,), f"{DOCS_DIR}/": doc_files},
    )
