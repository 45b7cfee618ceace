"""Every docstring example in the package runs, as written, and shows what it says."""

from __future__ import annotations

import doctest
import importlib

import pytest
from fixtures.package import modules


@pytest.mark.parametrize("name", [m for m in modules() if m != "ragtiller.__main__"])
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(name)
    flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    result = doctest.testmod(module, optionflags=flags, report=True)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"
