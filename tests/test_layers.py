"""Imports go one way, package by package, and no package reaches into another's private modules.

Checked three ways: statically (every module-level ``import ragtiller...`` points to the same or
a lower layer, imports under ``if TYPE_CHECKING:`` and inside functions exempt; and no import
anywhere names another package's ``_private`` module), by importing modules on their own in a
fresh interpreter, where an import cycle would fail, and by comparing ``docs/design.md``'s layer table and the README's map with :data:`LAYERS`.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys

import pytest
from fixtures.package import PACKAGE, modules

LAYERS: dict[str, tuple[int, str]] = {
    "errors": (0, "every exception class ragtiller raises"),
    "core": (
        0,
        "the tier protocol and its records (hits, candidates, roles), a turn's decisions, the run "
        "manifest, metadata filters, redaction, retry, bulkheads and the circuit breaker",
    ),
    "policies": (
        1,
        "the policy artifact (schema, loader, run context) and every per-turn decision as a pure "
        "function; no I/O, no LangGraph",
    ),
    "models": (2, "the local embedders (hashing, MiniLM, ONNX export) and batched embedding"),
    "stores": (2, "quota ledgers and caches, in memory or in Redis"),
    "routing": (2, "the deterministic query router and the optional LLM router"),
    "index": (
        3,
        "the embedded store: dense (exact or HNSW), parent-child and lexical tiers over one "
        "chunk table, the structures saved with each version, the corpus map, opening an index",
    ),
    "ranking": (
        4,
        "fusion, document ranking, passage selection, and the query-time tier options "
        "(parent-child window, section BM25, feedback)",
    ),
    "rerankers": (4, "the free floor and the paid ceilings (cross-encoder, Cohere)"),
    "adapters": (4, "LangChain vector stores and retrievers as tiers"),
    "ingest": (
        4,
        "reading sources, sections and passages, incremental builds, syncing other stores",
    ),
    "pinecone": (5, "Pinecone as the dense and lexical tiers, and upserting to it"),
    "nodes": (6, "the graph state and one module per node"),
    "graph": (7, "the builder, edges, per-run handling, and the tier backends a policy picks"),
    "eval": (8, "datasets, metrics, eval runs, tuning and promotion"),
    "integrations": (
        8,
        "LangChain retriever and tool, Studio graphs, the indexing graph, the demo, the "
        "deployment diagram, plain-text views",
    ),
    "testing": (8, "the contract suites a tier, store or embedder author subclasses (pytest)"),
    "cli": (9, "the `ragtiller` command and `python -m ragtiller`"),
    "__main__": (9, "`python -m ragtiller`"),
    "__init__": (9, "the package root re-exports lazily from every layer"),
}
"""Each package (and root module) of ragtiller: its layer and what lives there. A new one must
be placed here; ``docs/design.md`` and the README show this table."""

ROOT = PACKAGE.parent


def layer_of(module: str) -> int:
    part = module.split(".")[1] if "." in module else "__init__"
    assert part in LAYERS, f"{module}: place {part!r} in a layer in tests/test_layers.py"
    return LAYERS[part][0]


def package_of(module: str) -> str:
    return module.split(".")[1] if "." in module else "__init__"


def private_module(imported: str) -> str | None:
    """The package owning ``imported`` if ``imported`` is one of its private modules."""
    parts = imported.split(".")
    if len(parts) >= 3 and any(p.startswith("_") and not p.startswith("__") for p in parts[2:]):
        return parts[1]
    return None


def eager_imports(tree: ast.Module) -> list[str]:
    """``ragtiller`` modules imported at module level, outside ``if TYPE_CHECKING:`` (with
    ``from X import y``, both ``X`` and ``X.y``, so a private module imported by name counts)."""
    found: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("ragtiller"):
            found.append(node.module)
            found += [f"{node.module}.{a.name}" for a in node.names if a.name.startswith("_")]
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.startswith("ragtiller")]
    return found


def all_imports(tree: ast.Module) -> list[str]:
    """Every ``ragtiller`` module imported anywhere in the module (functions included)."""
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("ragtiller"):
            found.append(node.module)
            found += [f"{node.module}.{a.name}" for a in node.names if a.name.startswith("_")]
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.startswith("ragtiller")]
    return found


def source_of(module: str) -> str:
    path = ROOT / (module.replace(".", "/") + ".py")
    if not path.exists():
        path = ROOT / module.replace(".", "/") / "__init__.py"
    return path.read_text("utf-8")


@pytest.mark.parametrize("module", modules())
def test_module_imports_only_its_own_or_lower_layers(module: str) -> None:
    if module == "ragtiller":
        return  # the package root re-exports lazily from every layer
    own = layer_of(module)
    for imported in eager_imports(ast.parse(source_of(module))):
        if imported == "ragtiller":
            continue
        assert layer_of(imported) <= own, f"{module} (layer {own}) imports {imported}"


@pytest.mark.parametrize("module", [m for m in modules() if "." in m])
def test_no_module_imports_another_packages_private_module(module: str) -> None:
    """``ragtiller.index._x`` is for ``ragtiller.index`` alone: other packages use its public
    modules (anywhere in the file, function-level imports included)."""
    own = package_of(module)
    for imported in all_imports(ast.parse(source_of(module))):
        owner = private_module(imported)
        assert owner is None or owner == own, f"{module} imports {owner}'s private {imported}"


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
    importable = [m for m in modules() if m != "ragtiller.__main__"]  # that one runs the CLI
    done = subprocess.run(
        [sys.executable, "-c", FORK_EACH, *importable], capture_output=True, text=True, timeout=600
    )
    assert done.stdout.strip() == "FAILED", done.stdout + done.stderr[-3000:]


def test_policy_schema_does_not_load_langgraph() -> None:
    code = "import sys, ragtiller.policies.schema; print(any(m.startswith('langgraph') for m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "False", done.stderr


def test_every_state_key_is_documented() -> None:
    """Each field of the graph's state classes is followed by its docstring."""
    tree = ast.parse((PACKAGE / "nodes" / "state.py").read_text("utf-8"))
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


def layer_table() -> str:
    """The Markdown table ``docs/design.md`` shows, made from :data:`LAYERS`."""
    rows = ["| layer | package | holds |", "|---|---|---|"]
    for name, (layer, holds) in sorted(LAYERS.items(), key=lambda kv: (kv[1][0], kv[0])):
        if name.startswith("__"):
            continue
        rows.append(f"| {layer} | `{name}` | {holds} |")
    return "\n".join(rows)


def test_design_doc_layer_table_is_this_tests_table() -> None:
    text = (ROOT / "docs" / "design.md").read_text("utf-8")
    found = re.search(r"<!-- layers:start -->\n(.*?)\n<!-- layers:end -->", text, re.S)
    assert found, "docs/design.md lost its <!-- layers:start --> ... <!-- layers:end --> block"
    assert found.group(1) == layer_table(), "paste tests/test_layers.py's layer_table() there"


def test_every_package_has_a_directory_or_module_and_a_readme_line() -> None:
    readme = (ROOT / "README.md").read_text("utf-8")
    for name in LAYERS:
        if name.startswith("__"):
            continue
        assert (PACKAGE / name).is_dir() or (PACKAGE / f"{name}.py").exists(), name
        assert re.search(rf"^\| `{re.escape(name)}` \|", readme, re.M), f"README map lacks {name}"


def test_no_package_holds_more_than_a_quarter_of_the_code() -> None:
    lines = {name: 0 for name in LAYERS}
    for path in PACKAGE.rglob("*.py"):
        part = path.relative_to(PACKAGE).parts[0].removesuffix(".py")
        lines[part] += len(path.read_text("utf-8").splitlines())
    total = sum(lines.values())
    too_big = {n: round(c / total, 3) for n, c in lines.items() if c > total / 4}
    assert not too_big, too_big


INTERNAL_USES = re.compile(r"langgraph\._internal|__pregel_|\.__class__ = ")


@pytest.mark.parametrize("module", modules())
def test_no_module_imports_a_private_module_of_another_distribution(module: str) -> None:
    """``langgraph._internal`` and the like may change in any release: only public modules."""
    for node in ast.walk(ast.parse(source_of(module))):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [node.module]
        else:
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
        for name in names:
            private = [p for p in name.split(".") if p.startswith("_") and not p.startswith("__")]
            assert name.startswith("ragtiller") or not private, f"{module} imports {name}"


@pytest.mark.parametrize("module", modules())
def test_only_one_module_touches_langgraph_internals(module: str) -> None:
    """LangGraph's undocumented ``__pregel_*`` config keys and class swaps of its compiled
    graphs appear in ``graph/langgraph_internals.py`` alone."""
    if module == "ragtiller.graph.langgraph_internals":
        return
    code = "\n".join(
        line for line in source_of(module).splitlines() if not line.lstrip().startswith("#")
    )
    assert not INTERNAL_USES.search(code), (
        f"{module}: go through ragtiller.graph.langgraph_internals"
    )


def test_every_ragtiller_error_is_defined_in_errors() -> None:
    """One hierarchy in one module; other modules re-export the ones their users import."""
    import importlib

    from ragtiller.errors import RagtillerError

    for module in modules():
        if module != "ragtiller.__main__":
            importlib.import_module(module)
    found, todo = [], [RagtillerError]
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo += cls.__subclasses__()
    outside = {
        c.__qualname__: c.__module__
        for c in found
        if c.__module__.startswith("ragtiller.") and c.__module__ != "ragtiller.errors"
    }
    assert not outside
