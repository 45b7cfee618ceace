"""NDCG@10 of the documents a user's turn returns, not of the eval's one-passage-per-document run.

Run on demand (not in CI):

    python benchmarks/bench_user_turn_ndcg.py --index DIR --dataset ../shared/data/cranfield \
        --policy default --policy P.yaml [--top-k 10]

``ragtiller eval`` ranks documents at depth with one passage per document
(``ragtiller.eval.variants.with_depth``), so a policy field that only matters when a document
brings several passages (``budgets.passages_per_document``) cannot move its figures. Here every judged query goes through ``graph.invoke({"query": q}, context={"top_k":
K})`` with the policy as shipped (passages per document, context budget), and NDCG@10 is
computed over the returned documents in order of first appearance. One line per policy.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
from pathlib import Path

from ragtiller import build_graph
from ragtiller.index import open_index


def ndcg_at_10(ranked: list[str], judged: dict[str, int]) -> float:
    dcg = sum((2 ** judged.get(d, 0) - 1) / math.log2(i + 2) for i, d in enumerate(ranked[:10]))
    ideal = sorted(judged.values(), reverse=True)[:10]
    idcg = sum((2**v - 1) / math.log2(i + 2) for i, v in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--index", required=True)
    parser.add_argument("--dataset", required=True, type=Path)
    parser.add_argument("--policy", action="append", required=True)
    parser.add_argument("--top-k", type=int, default=10)
    args = parser.parse_args()
    qrels: dict[str, dict[str, int]] = {}
    with (args.dataset / "qrels" / "test.tsv").open(encoding="utf-8") as f:
        rows = csv.reader(f, delimiter="\t")
        next(rows)
        for query, doc, score in rows:
            qrels.setdefault(query, {})[doc] = int(score)
    lines = (args.dataset / "queries.jsonl").read_text(encoding="utf-8").splitlines()
    queries = {q["_id"]: q["text"] for q in map(json.loads, lines)}
    judged = {q: r for q, r in qrels.items() if q in queries and any(v > 0 for v in r.values())}
    index = open_index(args.index)
    for policy in args.policy:
        graph = build_graph(policy, index=index)
        scores = []
        for query, relevant in judged.items():
            out = graph.invoke({"query": queries[query]}, context={"top_k": args.top_k})
            docs = list(dict.fromkeys(str(d.metadata.get("doc_id")) for d in out["documents"]))
            scores.append(ndcg_at_10(docs, relevant))
        print(f"{args.dataset.name}  {policy}  NDCG@10 {sum(scores) / len(scores):.4f}  "
              f"({len(scores)} queries, top_k {args.top_k})")  # fmt: skip


if __name__ == "__main__":
    main()
