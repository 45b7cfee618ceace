"""The docs' pictures of the graph are the graph: each Mermaid block of it is what the code draws."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ragtiller.graph.builder import mermaid, png

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"^```mermaid\n(.*?)^```$", re.MULTILINE | re.DOTALL)


@pytest.mark.parametrize("doc", ["README.md", "docs/usage.md"])
def test_the_docs_show_the_graph_as_drawn(doc: str) -> None:
    """Regenerate the block with `ragtiller draw` when the topology changes."""
    blocks = [b for b in BLOCK.findall((ROOT / doc).read_text("utf-8")) if "assemble" in b]
    assert blocks, f"{doc} has no ```mermaid block of the graph"
    assert all(b == mermaid() for b in blocks), f"{doc}: paste `ragtiller draw` into its block"


def test_png_renders_offline_where_graphviz_is_installed(tmp_path: Path) -> None:
    pytest.importorskip("pygraphviz", reason="PNG rendering needs pygraphviz (Graphviz)")
    target = tmp_path / "graph.png"
    png(str(target))
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
