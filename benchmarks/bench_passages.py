"""Answer hit@k of the graph on a passage-level QA collection (the squad-dev layout).

Run on demand (not in CI), on an index made by ``ragtiller ingest <dataset>/docs --index DIR``:

    python benchmarks/bench_passages.py --index DIR --dataset ../shared/data/squad-dev \
        [--questions questions-1000.jsonl] [--policy P] [--top-k 5]

Every question goes through ``graph.invoke({"query": q}, context={"top_k": K})``, as a user
calls it. **Answer hit@k** (the dataset README's definition, DPR's top-k accuracy): some
returned passage among the first k contains an answer string, lower-cased, whitespace runs
collapsed, matched at word boundaries; an answer that is not at word boundaries in its own
gold passage is matched as a plain substring. Beside it: words per returned passage, context
words per turn (p50, p95: the sum over the turn's documents), turns returning fewer than K
passages, the labels they carried, and latency. One JSON object is printed.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ragtiller import build_graph
from ragtiller.index import open_index

KS = (1, 5, 10, 20)


def normalise(text: str) -> str:
    """Lower-cased, whitespace runs collapsed to one space."""
    return re.sub(r"\s+", " ", text.lower()).strip()


def answer_matchers(question: dict[str, Any]) -> list[Callable[[str], bool]]:
    """One test per answer string, over normalised text."""
    gold = normalise(question["passage"])
    tests: list[Callable[[str], bool]] = []
    for answer in question["answers"]:
        needle = normalise(answer)
        bounded = re.compile(r"(?<!\w)" + re.escape(needle) + r"(?!\w)")
        if bounded.search(gold):
            tests.append(lambda text, p=bounded: p.search(text) is not None)
        else:  # not at word boundaries even in its own passage: a plain substring
            tests.append(lambda text, n=needle: n in text)
    return tests


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run(
    index_dir: str, questions: list[dict[str, Any]], policy: str | None, top_k: int
) -> dict[str, Any]:
    graph = build_graph(policy, index=open_index(index_dir))
    hits = Counter[int]()
    passage_words: list[int] = []
    context_words: list[float] = []
    latency: list[float] = []
    short = 0
    labels = Counter[str]()
    for question in questions:
        tests = answer_matchers(question)
        started = time.perf_counter()
        out = graph.invoke({"query": question["question"]}, context={"top_k": top_k})
        latency.append((time.perf_counter() - started) * 1000.0)
        texts = [normalise(d.page_content) for d in out["documents"]]
        first = next((i for i, t in enumerate(texts) if any(test(t) for test in tests)), None)
        for k in KS:
            hits[k] += first is not None and first < k
        sizes = [len(d.page_content.split()) for d in out["documents"]]
        passage_words.extend(sizes)
        context_words.append(sum(sizes))
        short += len(sizes) < top_k
        labels.update(re.sub(r"\d+", "N", label) for label in out["manifest"].degraded)
    n = len(questions)
    return {
        "questions": n,
        "top_k": top_k,
        **{f"hit@{k}": round(hits[k] / n, 4) for k in KS if k <= top_k},
        "mean_passage_words": round(statistics.mean(passage_words), 1),
        "context_words_p50": percentile(context_words, 0.5),
        "context_words_p95": percentile(context_words, 0.95),
        "turns_short": short,
        "labels": dict(labels),
        "latency_ms_p50": round(percentile(latency, 0.5), 1),
        "latency_ms_p95": round(percentile(latency, 0.95), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--index", required=True)
    parser.add_argument("--dataset", required=True, type=Path)
    parser.add_argument("--questions", default="questions-1000.jsonl")
    parser.add_argument("--policy", default=None)
    parser.add_argument("--top-k", type=int, default=5)
    args = parser.parse_args()
    path = args.dataset / args.questions
    questions = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    print(json.dumps(run(args.index, questions, args.policy, args.top_k)))


if __name__ == "__main__":
    main()
