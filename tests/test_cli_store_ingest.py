"""Folder -> your own vector store -> graph: ``ragtiller ingest --store`` with a persistent Chroma."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from langchain_chroma import Chroma

from ragtiller import build_graph
from ragtiller.ingest import SQLiteRecordManager
from ragtiller.integrations.demo import demo_embedder

FACTORY = """from langchain_chroma import Chroma


def chroma(embeddings):
    return Chroma("docs", embedding_function=embeddings, persist_directory="chroma")
"""


def ingest(workdir: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    command = [
        sys.executable,
        "-m",
        "ragtiller",
        "ingest",
        "docs",
        "--embedder",
        "hashing",
    ]
    return subprocess.run(
        [*command, "--quiet", *extra],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )


def test_ingest_writes_a_folder_to_your_store_then_only_what_changed(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "ports.md").write_text(
        "# Ports\n\nThe server listens on port 8000.\n\n## Logs\n\nLogs go to /var/log/app.\n"
    )
    (tmp_path / "stores.py").write_text(FACTORY)
    store_args = ("--store", "stores:chroma", "--records", "records.sqlite")
    first = ingest(tmp_path, *store_args)
    assert first.returncode == 0, first.stderr
    assert "documents: 1 added" in first.stdout and "chunks: 2 added" in first.stdout
    again = ingest(tmp_path, *store_args)
    assert "chunks: 0 added, 0 updated, 2 unchanged, 0 deleted" in again.stdout, again.stdout

    store = Chroma(
        "docs",
        embedding_function=demo_embedder("hashing"),
        persist_directory=str(tmp_path / "chroma"),
    )
    records = SQLiteRecordManager("stores:chroma", tmp_path / "records.sqlite")
    assert records.tenanted() is False  # the store's manifest: no chunk carries a tenant
    graph = build_graph(
        tiers=[store], embedder=demo_embedder("hashing"), require_tenant=records.tenanted()
    )
    out = graph.invoke({"query": "which port does the server listen on"})
    assert "port 8000" in out["documents"][0].page_content


def test_a_store_needs_its_records_file_and_a_loadable_factory(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A\n\ntext\n")
    missing = ingest(tmp_path, "--store", "stores:chroma")
    assert missing.returncode == 2 and "--store needs --records FILE" in missing.stderr
    unknown = ingest(tmp_path, "--store", "nowhere:chroma", "--records", "r.sqlite")
    assert unknown.returncode == 2 and "No module named 'nowhere'" in unknown.stderr
