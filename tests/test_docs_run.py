"""The Python blocks of README.md and docs/*.md run, offline, in order, one namespace per file.

Each file's blocks run in a namespace that already holds what the prose assumes: ``index`` and
``graph`` (a hashing-embedder index over this repository's docs/), ``my_chat_model`` and
``model`` (a fake chat model) and ``url`` (a real redis-server, which also stands in for
the docs' ``redis://localhost:6379/0``). Where a block
builds its own index with ``local_embedder()``, the hashing embedder stands in for MiniLM
(tests stay fast and offline). A block that cannot run here says so in the doc, just above it,
as ``<!-- not run: reason -->``; the reason is part of the doc.
"""

from __future__ import annotations

import ast
import asyncio
import re
import sys
import textwrap
import types
from pathlib import Path
from typing import Any

import pytest
from fixtures.fakes import ScriptedChatModel

import ragtiller.models
from ragtiller import build_graph
from ragtiller.index import EmbeddedIndex
from ragtiller.ingest import build_index
from ragtiller.models import HashingEmbedder

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(
    r"(<!-- not run: (?P<why>[^>]+) -->\n *)?```python\n(?P<code>.*?)^ *```", re.M | re.S
)


LOCAL_REDIS = "redis://localhost:6379/0"
"""The docs' Redis; blocks run against the test's own redis-server instead."""


def blocks(doc: Path) -> list[tuple[str, str | None]]:
    text = doc.read_text("utf-8")
    return [(textwrap.dedent(m["code"]), m["why"]) for m in BLOCK.finditer(text)]


@pytest.fixture(scope="module")
def docs_index(tmp_path_factory: pytest.TempPathFactory) -> EmbeddedIndex:
    return build_index([ROOT / "docs"], embedder=HashingEmbedder(), progress=False)


class ToolCallingModel(ScriptedChatModel):
    """The fake chat model, as an agent needs it: tools bind, and it answers without calling any."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> ToolCallingModel:  # type: ignore[override]
        return self


def run_block(code: str, namespace: dict[str, Any]) -> None:
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    compiled = compile(code, "<doc block>", "exec", flags=flags)
    result = eval(compiled, namespace)
    if asyncio.iscoroutine(result):
        asyncio.run(result)


@pytest.mark.redis
@pytest.mark.parametrize(
    "doc", [d for d in DOCS if any(why is None for _, why in blocks(d))], ids=lambda d: d.name
)
def test_doc_blocks_run(
    doc: Path,
    docs_index: EmbeddedIndex,
    redis_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "docs").symlink_to(ROOT / "docs")
    monkeypatch.setattr(ragtiller.models, "local_embedder", lambda **_: HashingEmbedder())
    module = types.ModuleType("ragtiller_doc_block")  # type hints resolve in a real module
    monkeypatch.setitem(sys.modules, module.__name__, module)
    namespace: dict[str, Any] = module.__dict__
    namespace |= {
        "index": docs_index,
        "graph": build_graph(index=docs_index),
        "my_chat_model": ScriptedChatModel(),
        "model": ToolCallingModel(reply="Rotate them with the admin API."),
        "url": redis_url,
    }
    for code, why in blocks(doc):
        if why is None:
            run_block(code.replace(LOCAL_REDIS, redis_url), namespace)
