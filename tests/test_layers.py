"""Imports go one way: types -> policies -> stores/index/rerankers -> nodes -> graph -> apps.

Checked two ways: statically (every module-level ``import ragtiller...`` points to the same or
a lower layer; imports under ``if TYPE_CHECKING:`` and inside functions are exempt), and by
importing modules on their own in a fresh interpreter, where an import cycle would fail.
"""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest
from fixtures.package import PACKAGE, modules

LAYERS: dict[str, int] = {
    "errors": 0,
    "types": 0,
    "filters": 0,
    "records": 0,
    "manifest": 0,
    "_retry": 0,
    "policies": 1,
    "stores": 2,
    "index": 2,
    "rerankers": 2,
    "routing": 2,
    "fusion": 2,
    "doc_ranking": 2,
    "doc_units": 2,
    "passages": 2,
    "feedback": 2,
    "query_tiers": 2,
    "adapters": 2,
    "redact": 0,
    "bulkhead": 0,
    "breaker": 0,
    "providers": 0,
    "nodes": 3,
    "graph": 4,
    "display": 5,
    "eval": 5,
    "integrations": 5,
    "studio": 5,
    "studio_graphs": 5,
    "indexing_graph": 5,
    "demo": 5,
    "deployment": 5,
    "cli": 5,
    "testing": 5,
    "exit_codes": 5,
    "__init__": 5,
}
"""Each top-level module or package of ragtiller, by layer; a new one must be placed here."""


def layer_of(module: str) -> int:
    part = module.split(".")[1] if "." in module else "__init__"
    assert part in LAYERS, f"{module}: place {part!r} in a layer in tests/test_layers.py"
    return LAYERS[part]


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


FORK_EACH = """
import importlib, os, sys, traceback
import langchain_core.documents, langgraph.graph, numpy, pydantic, yaml  # shared, not ragtiller
failed = []
for name in sys.argv[1:]:
    pid = os.fork()
    if pid == 0:
        try:
            importlib.import_module(name)
        except BaseException:
            traceback.print_exc()
            os._exit(1)
        os._exit(0)
    if os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) != 0:
        failed.append(name)
print("FAILED", *failed)
"""


def test_every_module_imports_alone() -> None:
    """Each module imported first, in a forked interpreter that has loaded no ragtiller module
    (third-party libraries are preloaded once, to keep this fast): an import cycle fails here
    whatever order the test suite happens to import things in."""
    done = subprocess.run(
        [sys.executable, "-c", FORK_EACH, *modules()], capture_output=True, text=True, timeout=600
    )
    assert done.stdout.strip() == "FAILED", done.stdout + done.stderr[-3000:]


def test_policy_schema_does_not_load_langgraph() -> None:
    code = "import sys, ragtiller.policies.schema; print(any(m.startswith('langgraph') for m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "False", done.stderr


def test_every_state_key_is_documented() -> None:
    """Each field of the graph's state classes is followed by its docstring."""
    tree = ast.parse((PACKAGE / "graph" / "state.py").read_text("utf-8"))
    undocumented = []
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
        body = cls.body
        for i, node in enumerate(body):
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                following = body[i + 1] if i + 1 < len(body) else None
                documented = isinstance(following, ast.Expr) and isinstance(
                    following.value, ast.Constant
                )
                if not documented:
                    undocumented.append(f"{cls.name}.{node.target.id}")
    assert not undocumented
