"""Imports go one way: types -> policies -> stores/index/rerankers -> nodes -> graph -> apps.

Checked two ways: statically (every module-level ``import ragtiller...`` points to the same or
a lower layer; imports under ``if TYPE_CHECKING:`` and inside functions are exempt), and by
importing modules on their own in a fresh interpreter, where an import cycle would fail.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "ragtiller"

LAYERS: dict[str, int] = {
    "errors": 0,
    "types": 0,
    "records": 0,
    "manifest": 0,
    "_retry": 0,
    "policies": 1,
    "stores": 2,
    "index": 2,
    "rerankers": 2,
    "routing": 2,
    "fusion": 2,
    "redact": 0,
    "nodes": 3,
    "graph": 4,
    "display": 5,
    "eval": 5,
    "integrations": 5,
    "studio": 5,
    "demo": 5,
    "cli": 5,
    "exit_codes": 5,
    "__init__": 5,
}
"""Each top-level module or package of ragtiller, by layer; a new one must be placed here."""


def layer_of(module: str) -> int:
    part = module.split(".")[1] if "." in module else "__init__"
    assert part in LAYERS, f"{module}: place {part!r} in a layer in tests/test_layers.py"
    return LAYERS[part]


def modules() -> list[str]:
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = ("ragtiller", *path.relative_to(PACKAGE).with_suffix("").parts)
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def eager_imports(tree: ast.Module) -> list[str]:
    """``ragtiller`` modules imported at module level, outside ``if TYPE_CHECKING:``."""
    found: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("ragtiller"):
            found.append(node.module)
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.startswith("ragtiller")]
    return found


@pytest.mark.parametrize("module", modules())
def test_module_imports_only_its_own_or_lower_layers(module: str) -> None:
    path = PACKAGE.parent / (module.replace(".", "/") + ".py")
    if not path.exists():
        path = PACKAGE.parent / module.replace(".", "/") / "__init__.py"
    if module == "ragtiller":
        return  # the package root re-exports lazily from every layer
    own = layer_of(module)
    for imported in eager_imports(ast.parse(path.read_text("utf-8"))):
        if imported == "ragtiller":
            continue
        assert layer_of(imported) <= own, f"{module} (layer {own}) imports {imported}"


@pytest.mark.parametrize(
    "module",
    [m for m in modules() if m.startswith(("ragtiller.nodes", "ragtiller.policies"))],
)
def test_module_imports_alone_in_a_fresh_interpreter(module: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", f"import {module}"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]


def test_policy_schema_does_not_load_langgraph() -> None:
    code = "import sys, ragtiller.policies.schema; print(any(m.startswith('langgraph') for m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "False", done.stderr
