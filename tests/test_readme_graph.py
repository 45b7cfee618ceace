"""The README's picture of the graph is the graph: its Mermaid block is what the code draws."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ragtiller.graph.draw import mermaid, png

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCK = re.compile(r"^```mermaid\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def test_readme_shows_the_graph_as_drawn() -> None:
    """Regenerate the block with `ragtiller draw` when the topology changes."""
    blocks = BLOCK.findall(README.read_text("utf-8"))
    assert mermaid() in blocks, (
        "README.md has no ```mermaid block equal to `ragtiller draw`; "
        f"found {len(blocks)} mermaid block(s)"
    )


def test_png_renders_offline_where_graphviz_is_installed(tmp_path: Path) -> None:
    pytest.importorskip("pygraphviz", reason="PNG rendering needs pygraphviz (Graphviz)")
    target = tmp_path / "graph.png"
    png(str(target))
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
