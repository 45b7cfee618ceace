"""Docs are tests: every notebook in notebooks/ is committed without outputs and runs offline."""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbformat.v4 import new_code_cell, new_notebook

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
EXPECTED = ["01_quickstart", "02_step_through", "03_quota_day", "04_policies_and_eval"]
THIRD_PARTY_NOISE = (
    # bm25s imports tqdm.auto, which warns inside Jupyter when ipywidgets is not installed.
    "TqdmWarning: IProgress not found",
    "from .autonotebook import tqdm as notebook_tqdm",
    # Graphviz's dot on some hosts: a fontconfig file newer than the installed fontconfig.
    "Fontconfig warning:",
)
HOST_SETTINGS = ("REDIS_URL", "COHERE_API_KEY", "RAGTILLER_POLICY")
"""Environment a developer may have set that would change what the notebooks do."""


def execute(notebook: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Run ``notebook`` in the ``python3`` kernel (this interpreter), from notebooks/."""
    client = NotebookClient(
        notebook,
        kernel_name="python3",
        timeout=300,
        resources={"metadata": {"path": str(NOTEBOOKS)}},
    )
    return client.execute()


def stderr_of(notebook: nbformat.NotebookNode) -> list[str]:
    lines = []
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            if output.get("name") == "stderr":
                lines.extend(output["text"].splitlines())
    return [
        line for line in lines if line.strip() and not any(n in line for n in THIRD_PARTY_NOISE)
    ]


def test_the_notebooks_are_the_expected_ones_and_stripped() -> None:
    assert sorted(p.stem for p in NOTEBOOKS.glob("*.ipynb")) == EXPECTED
    for name in EXPECTED:
        notebook = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
        nbformat.validate(notebook)
        assert notebook.metadata["kernelspec"]["name"] == "python3"
        code = [cell for cell in notebook.cells if cell.cell_type == "code"]
        assert code, name
        assert all(cell.outputs == [] and cell.execution_count is None for cell in code), name


@pytest.mark.slow
def test_the_kernel_runs_this_interpreter() -> None:
    probe = new_notebook(cells=[new_code_cell("import sys; print(sys.prefix)")])
    output = execute(probe).cells[0].outputs[0]["text"].strip()
    assert Path(output).resolve() == Path(sys.prefix).resolve()


@pytest.mark.slow
@pytest.mark.parametrize("name", EXPECTED)
def test_notebook_runs_offline(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in HOST_SETTINGS:
        monkeypatch.delenv(variable, raising=False)
    notebook = execute(nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4))
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert all(cell.execution_count is not None for cell in code)
    assert any(cell.outputs for cell in code)
    assert stderr_of(notebook) == []
