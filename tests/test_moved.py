"""Import paths of 0.1 that moved in 0.2 keep working for one release, each with a warning
that names where the thing lives now."""

from __future__ import annotations

import importlib
import sys

import pytest
from langchain_core.documents import Document

from ragtiller import _moved
from ragtiller.index import EmbeddedIndex


@pytest.mark.parametrize("old", sorted(_moved.MOVED_MODULES))
def test_an_old_module_path_is_the_new_module_with_a_warning(old: str) -> None:
    new = _moved.MOVED_MODULES[old]
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=f"{old} moved to {new}"):
        module = importlib.import_module(old)
    assert module is importlib.import_module(new)


def test_old_from_import_of_a_module_works() -> None:
    sys.modules.pop("ragtiller.fusion", None)
    with pytest.warns(DeprecationWarning, match="ragtiller.ranking.fusion"):
        from ragtiller.fusion import reciprocal_rank_fusion  # noqa: F401


@pytest.mark.parametrize(
    ("name", "home"),
    [
        ("ingest", "ragtiller.ingest"),
        ("HashingEmbedder", "ragtiller.models"),
        ("PineconeTier", "ragtiller.pinecone"),
        ("RetryPolicy", "ragtiller.core"),
        ("tiers_for_policy", "ragtiller.graph"),
    ],
)
def test_a_name_that_left_ragtiller_index_resolves_with_a_warning(name: str, home: str) -> None:
    import ragtiller.index

    with pytest.warns(DeprecationWarning, match=f"ragtiller.index.{name} moved to {home}.{name}"):
        value = getattr(ragtiller.index, name)
    assert value is getattr(importlib.import_module(home), name)


def test_an_unknown_name_is_still_an_attribute_error() -> None:
    import ragtiller.index

    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        ragtiller.index.nope  # noqa: B018


def test_embedded_index_build_still_builds_with_a_warning() -> None:
    from ragtiller.models import HashingEmbedder

    doc = Document("# Setup\n\nRun make.", metadata={"source": "a.md"})
    with pytest.warns(DeprecationWarning, match="ragtiller.ingest.build_index"):
        index = EmbeddedIndex.build([doc], embedder=HashingEmbedder(), progress=False)
    assert len(index.store.records) == 1 and index.report is not None


def test_the_design_doc_lists_every_moved_module() -> None:
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "design.md").read_text("utf-8")
    block = re.search(r"<!-- moved:start -->\n(.*?)\n<!-- moved:end -->", text, re.S)
    assert block, "docs/design.md lost its moved-modules table"
    rows = re.findall(r"^\| `([\w.]+)` \| `([\w.]+)` \|$", block.group(1), re.M)
    assert dict(rows) == _moved.MOVED_MODULES
