"""The local embedder: today's torch path against the ONNX variants, side by side in one run.

Sections (pick with --only; all run by default):

* ``quality``: dense-only NDCG@10 (exact cosine over whole documents, title + text, as the
  datasets' reference dense rows) on Cranfield and CACM, and each variant's mean cosine to the
  torch vectors.
* ``query``: one-query embedding latency p50/p95, interleaved rounds.
* ``ingest``: chunks/s embedding the first N Cranfield abstracts, interleaved rounds; "today"
  is torch with batches of 64 in corpus order (the path before length-sorted batching).
* ``ask``: a cached ``ragtiller ask`` end to end (fresh process each time), torch vs ONNX.
* ``demo``: the demo's first run from nothing (model export and index build included), each
  runtime in its own empty cache (``--only demo``, slow).

    python benchmarks/bench_embed.py --only quality query ingest ask
    python benchmarks/bench_embed.py --only demo
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ragtiller.eval.datasets import load_beir, read_jsonl
from ragtiller.eval.metrics import ndcg_at_k
from ragtiller.models import MiniLMEmbedder, embed_texts
from ragtiller.models.onnx_model import OnnxMiniLMEmbedder, prepare_model

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
Factory = Callable[[], Any]


def variants(configs: tuple[tuple[str, int | None, int], ...]) -> dict[str, Factory]:
    """Name -> embedder factory: torch, then each ONNX (variant, threads, batch size)."""
    found: dict[str, Factory] = {"torch-fp32": lambda: MiniLMEmbedder(batch_size=64)}
    for variant, threads, batch in configs:
        model = prepare_model(variant)  # type: ignore[arg-type]
        name = f"onnx-{variant} t={threads or 'auto'} b={batch}"
        found[name] = lambda m=model, t=threads, b=batch: OnnxMiniLMEmbedder(
            m, threads=t, batch_size=b
        )
    return found


def corpus(name: str) -> tuple[list[str], list[str]]:
    ids, texts = [], []
    for row in read_jsonl(DATA / name / "corpus.jsonl"):
        ids.append(str(row["_id"]))
        texts.append(f"{row.get('title', '')} {row.get('text', '')}".strip())
    return ids, texts


REFERENCE_DENSE = {"cranfield": 0.3817, "cacm": 0.4091}
"""Dense all-MiniLM-L6-v2 NDCG@10 from each dataset's README (the torch path reproduces it)."""


def quality(makers: dict[str, Factory], torch_sample: int, datasets: list[str]) -> None:
    print("## quality: dense-only NDCG@10, whole documents (title + text), exact cosine")
    torch = makers.pop("torch-fp32")()
    for dataset in datasets:
        ids, texts = corpus(dataset)
        evals = load_beir(DATA / dataset)
        qids = list(evals.queries)
        sample = texts[:: max(1, len(texts) // torch_sample)][:torch_sample]
        torch_sample_vectors = embed_texts(torch, sample, progress=False)
        print(f"{dataset:9} torch-fp32 (dataset README)    NDCG@10 {REFERENCE_DENSE[dataset]:.4f}")
        for name, make in makers.items():
            emb = make()
            started = time.perf_counter()
            docs = embed_texts(emb, texts, batch_size=64, progress=False)
            took = time.perf_counter() - started
            queries = embed_texts(emb, [evals.queries[q] for q in qids], progress=False)
            scores = queries @ docs.T
            ndcgs = []
            for row, qid in enumerate(qids):
                top = np.argsort(-scores[row], kind="stable")[:10]
                value = ndcg_at_k([ids[i] for i in top], evals.qrels[qid], 10)
                if value is not None:
                    ndcgs.append(value)
            ndcg = statistics.fmean(ndcgs)
            sample_vectors = embed_texts(emb, sample, progress=False)
            cosine = (sample_vectors * torch_sample_vectors).sum(axis=1)
            print(
                f"{dataset:9} {name:30} NDCG@10 {ndcg:.4f} "
                f"({ndcg - REFERENCE_DENSE[dataset]:+.4f})  cos to torch on {len(sample)} docs: "
                f"mean {cosine.mean():.4f} min {cosine.min():.4f}  ({len(texts) / took:.1f} docs/s)"
            )


def query_latency(makers: dict[str, Factory], rounds: int, count: int) -> None:
    print(f"## query: one-query embedding, ms ({count} queries x {rounds} interleaved rounds)")
    evals = load_beir(DATA / "cranfield")
    queries = list(evals.queries.values())[:count]
    embedders = {name: make() for name, make in makers.items()}
    times: dict[str, list[float]] = {name: [] for name in embedders}
    for emb in embedders.values():
        emb.embed_query("warm up")
    for _ in range(rounds):
        for name, emb in embedders.items():
            for q in queries:
                started = time.perf_counter()
                emb.embed_query(q)
                times[name].append(1000 * (time.perf_counter() - started))
    base = statistics.median(times["torch-fp32"])
    for name, values in times.items():
        p50, p95 = statistics.median(values), float(np.percentile(values, 95))
        print(f"{name:22} p50 {p50:6.2f}  p95 {p95:6.2f}  ({base / p50:.2f}x torch)")


def ingest(makers: dict[str, Factory], docs: int, rounds: int) -> None:
    print(f"## ingest: chunks/s over {docs} Cranfield abstracts ({rounds} interleaved rounds)")
    _, texts = corpus("cranfield")
    texts = texts[:docs]
    torch = makers["torch-fp32"]()

    def today() -> None:  # the path before this change: batches of 64 in corpus order
        for first in range(0, len(texts), 64):
            torch.embed_documents(texts[first : first + 64])

    runs: dict[str, Callable[[], object]] = {"today: torch-fp32 corpus order": today}
    for name, make in makers.items():
        emb = torch if name == "torch-fp32" else make()
        runs[f"{name} sorted"] = lambda e=emb: embed_texts(e, texts, batch_size=64, progress=False)
    rates: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(rounds):
        for name, run in runs.items():
            started = time.perf_counter()
            run()
            rates[name].append(len(texts) / (time.perf_counter() - started))
    base = statistics.median(rates["today: torch-fp32 corpus order"])
    for name, values in rates.items():
        rate = statistics.median(values)
        print(f"{name:36} {rate:6.1f} chunks/s  {rate / base:.2f}x today  {_spread(values)}")


def ask(rounds: int) -> None:
    print("## ask: cached `ragtiller ask`, fresh process, seconds (interleaved rounds)")
    with tempfile.TemporaryDirectory() as tmp:
        corpus_file = Path(tmp) / "corpus.jsonl"
        with open(corpus_file, "w", encoding="utf-8") as out:
            for row, _ in zip(
                read_jsonl(DATA / "cranfield" / "corpus.jsonl"), range(300), strict=False
            ):
                out.write(json.dumps(row) + "\n")
        index = str(Path(tmp) / "idx")
        _cli(["ingest", str(corpus_file), "--index", index, "--quiet"], {})
        question = "what is the boundary layer on a flat plate in hypersonic flow?"
        times: dict[str, list[float]] = {"torch": [], "auto": []}
        cpu: dict[str, list[float]] = {"torch": [], "auto": []}
        for _ in range(rounds):
            for runtime in times:
                started = time.perf_counter()
                env = {"RAGTILLER_EMBEDDER_RUNTIME": runtime}
                cpu[runtime].append(_cli(["ask", question, "--index", index], env))
                times[runtime].append(time.perf_counter() - started)
        for runtime, values in times.items():
            label = "torch (today)" if runtime == "torch" else "onnx-uint8 (default)"
            print(
                f"{label:22} median {statistics.median(values):5.2f} s wall, "
                f"{statistics.median(cpu[runtime]):5.2f} s CPU  {_spread(values)}"
            )


def demo() -> None:
    print("## demo: first run from an empty model and index cache, seconds")
    question = "how do I run several coroutines concurrently?"
    for runtime in ("torch", "auto"):
        with tempfile.TemporaryDirectory() as tmp:
            env = {"RAGTILLER_EMBEDDER_RUNTIME": runtime, "RAGTILLER_MODEL_CACHE": tmp + "/m"}
            args = ["demo", "--cache-dir", tmp + "/idx", "--question", question]
            started = time.perf_counter()
            cpu = _cli(args, env)
            first = time.perf_counter() - started
            started = time.perf_counter()
            _cli(args, env)
            again = time.perf_counter() - started
        label = "torch (today)" if runtime == "torch" else "onnx-uint8 incl. export"
        print(f"{label:24} first run {first:6.1f} s (CPU {cpu:6.1f} s)  cached run {again:5.1f} s")


def _cli(args: list[str], env: dict[str, str]) -> float:
    """Run ``ragtiller ARGS`` in a fresh process; return its CPU seconds (user + system)."""
    before = os.times()
    done = subprocess.run(
        [sys.executable, "-m", "ragtiller", *args],
        stdout=subprocess.DEVNULL,
        env={**os.environ, **env},
    )
    if done.returncode:
        print(f"  (exit code {done.returncode}: ragtiller {args[0]}, {env})")
    after = os.times()
    return (after.children_user - before.children_user) + (
        after.children_system - before.children_system
    )


def _spread(values: list[float]) -> str:
    return "[" + ", ".join(f"{v:.2f}" for v in values) + "]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    sections = ("quality", "query", "ingest", "ask", "demo")
    parser.add_argument("--only", nargs="+", choices=sections, default=sections[:-1])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--docs", type=int, default=1000, help="Abstracts for the ingest run.")
    parser.add_argument("--queries", type=int, default=100, help="Queries per latency round.")
    parser.add_argument("--datasets", nargs="+", default=["cranfield", "cacm"])
    parser.add_argument("--quality-variants", nargs="+", default=["fp32", "uint8"])
    parser.add_argument(
        "--torch-sample", type=int, default=200, help="Documents torch embeds for the cosines."
    )
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    if "quality" in args.only:
        chosen = tuple((v, None, 32) for v in args.quality_variants)
        quality(variants(chosen), args.torch_sample, args.datasets)
    if "query" in args.only:
        configs = tuple((v, t, 32) for v in ("fp32", "uint8") for t in (1, 2))
        query_latency(variants(configs), args.rounds, args.queries)
    if "ingest" in args.only:
        configs = (
            ("fp32", 2, 32),
            ("fp32", 2, 64),
            ("uint8", 1, 32),
            *(("uint8", 2, b) for b in (16, 32, 64)),
        )
        ingest(variants(configs), args.docs, args.rounds)
    if "ask" in args.only:
        ask(args.rounds)
    if "demo" in args.only:
        demo()
    print(f"load average at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
