"""Passage retrieval on squad-dev laid out as other corpora are: with sections, with long paragraphs.

squad-dev's articles are one section each, of paragraphs that mostly fit a default chunk (mean
123 words). Passage collections squad-dev does not stand for (papers, manuals) have section
headings and paragraphs longer than a chunk. Three copies of squad-dev's documents, the same
questions and answers:

- ``original``: the dataset as it is;
- ``headings``: a ``## Part N`` heading before every fifth paragraph (articles with sections);
- ``merged``: every two consecutive paragraphs joined into one (mean about 246 words, so most
  paragraphs are longer than the default 200-word chunk and are cut).

Each copy goes the user's path: ``ragtiller ingest <docs> --index DIR`` with default settings,
then ``ragtiller eval --split questions-1000 --top-k 5 --json`` (the CLI's own ``main``, in
process). Beside it, the squad-dev README's reference baselines, computed again over that
copy's own paragraphs: BM25 (bm25s, Lucene k1 1.5 b 0.75, English stopwords, Snowball), MiniLM
(ONNX fp32, which gives sentence-transformers' vectors), and their z-score and RRF fusion over
each list's top 100 (a miss at that list's lowest z), by ragtiller's own ``zscore_fusion`` and
``reciprocal_rank_fusion``. Prints one JSON object per copy.

    python benchmarks/bench_passage_layouts.py --squad ../shared/data/squad-dev --work /tmp/layouts
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import bm25s
import numpy as np
import Stemmer

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_passages import answer_matchers, normalise  # noqa: E402

from ragtiller.cli.app import main as ragtiller  # noqa: E402
from ragtiller.models.embedders import local_embedder  # noqa: E402
from ragtiller.ranking.fusion import reciprocal_rank_fusion, zscore_fusion  # noqa: E402

QUESTIONS = "questions-1000"
DEPTH = 100
RRF_K = 60


def headings(paragraphs: list[str]) -> list[str]:
    """A ``## Part N`` heading before every fifth paragraph."""
    out: list[str] = []
    for i, paragraph in enumerate(paragraphs):
        if i % 5 == 0:
            out.append(f"## Part {i // 5 + 1}")
        out.append(paragraph)
    return out


def merged(paragraphs: list[str]) -> list[str]:
    """Every two consecutive paragraphs as one."""
    return [" ".join(paragraphs[i : i + 2]) for i in range(0, len(paragraphs), 2)]


LAYOUTS: dict[str, Callable[[list[str]], list[str]]] = {
    "original": list,
    "headings": headings,
    "merged": merged,
}


def write_layout(squad: Path, out: Path, layout: Callable[[list[str]], list[str]]) -> list[str]:
    """The copy's documents under ``out/docs`` and its questions file; returns its paragraphs."""
    (out / "docs").mkdir(parents=True, exist_ok=True)
    paragraphs: list[str] = []
    for source in sorted((squad / "docs").glob("*.md")):
        title, *body = source.read_text(encoding="utf-8").split("\n\n")
        blocks = layout(body)
        (out / "docs" / source.name).write_text("\n\n".join([title, *blocks]), encoding="utf-8")
        paragraphs += [b for b in blocks if not b.startswith("#")]
    shutil.copy(squad / f"{QUESTIONS}.jsonl", out / f"{QUESTIONS}.jsonl")
    return paragraphs


def user_path(dataset: Path, index: Path) -> dict[str, Any]:
    """``ragtiller ingest`` then ``ragtiller eval --json``, as a user runs them."""
    code = ragtiller(["ingest", str(dataset / "docs"), "--index", str(index), "--quiet"])
    if code != 0:
        raise SystemExit(f"ragtiller ingest exited {code}")
    report = io.StringIO()
    with contextlib.redirect_stdout(report):
        args = ["--split", QUESTIONS, "--top-k", "5", "--concurrency", "2", "--no-progress"]
        code = ragtiller(
            ["eval", "--index", str(index), "--dataset", str(dataset), *args, "--json"]
        )
    if code != 0:
        raise SystemExit(f"ragtiller eval exited {code}")
    metrics = json.loads(report.getvalue())["metrics"]["all"]
    return {
        "hit@1": round(metrics["hit_at_1"], 3),
        "hit@5": round(metrics["hit_at_5"], 3),
        "words_per_passage": round(metrics["words_per_passage"]),
        "context_words_p95": round(metrics["context_words"]["p95"]),
    }


def references(paragraphs: list[str], questions: list[dict[str, Any]]) -> dict[str, Any]:
    """hit@1 / hit@5 of BM25, MiniLM and their z-score and RRF fusion over ``paragraphs``."""
    stemmer = Stemmer.Stemmer("english")

    def tokens(texts: list[str]) -> Any:
        return bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False)

    bm25 = bm25s.BM25(method="lucene", k1=1.5, b=0.75)
    bm25.index(tokens(paragraphs), show_progress=False)
    embedder = local_embedder(variant="fp32")
    vectors = np.asarray(embedder.embed_documents(paragraphs), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    texts = [normalise(p) for p in paragraphs]
    hits = {name: [0, 0] for name in ("bm25", "dense", "zscore", "rrf")}
    for question in questions:
        found, scores = bm25.retrieve(tokens([question["question"]]), k=DEPTH, show_progress=False)
        lexical = [(int(i), float(s)) for i, s in zip(found[0], scores[0], strict=True) if s > 0]
        query = np.asarray(embedder.embed_query(question["question"]), dtype=np.float32)
        cosines = vectors @ (query / np.linalg.norm(query))
        dense = [(int(i), float(cosines[i])) for i in np.argsort(-cosines)[:DEPTH]]
        lists = {"bm25": dict(lexical), "dense": dict(dense)}
        zscore = zscore_fusion(lists)
        rrf = reciprocal_rank_fusion({name: list(s) for name, s in lists.items()}, k=RRF_K)
        orders = {
            **{name: list(s) for name, s in lists.items()},
            "zscore": sorted(zscore, key=lambda i: -zscore[i]),
            "rrf": sorted(rrf, key=lambda i: -rrf[i]),
        }
        tests = answer_matchers(question)
        for name, order in orders.items():
            found_at = [any(test(texts[i]) for test in tests) for i in order[:5]]
            hits[name][0] += bool(found_at[:1] and found_at[0])
            hits[name][1] += any(found_at)
    n = len(questions)
    return {name: [round(h1 / n, 3), round(h5 / n, 3)] for name, (h1, h5) in hits.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--squad", type=Path, required=True, help="The squad-dev folder.")
    parser.add_argument("--work", type=Path, required=True, help="Where copies and indexes go.")
    parser.add_argument("--layouts", nargs="+", default=list(LAYOUTS), choices=list(LAYOUTS))
    args = parser.parse_args()
    path = args.squad / f"{QUESTIONS}.jsonl"
    questions = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    for name in args.layouts:
        dataset = args.work / name
        shutil.rmtree(dataset, ignore_errors=True)
        paragraphs = write_layout(args.squad, dataset, LAYOUTS[name])
        row = {"layout": name, "paragraphs": len(paragraphs)}
        row |= user_path(dataset, args.work / f"{name}-index")
        row["reference hit@1, hit@5"] = references(paragraphs, questions)
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
