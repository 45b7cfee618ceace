"""A real demo corpus present on every Python install: the language reference topics and stdlib
docstrings (about 2,200 chunks at the default chunking; ``benchmarks/bench_index.py`` times it)."""

from __future__ import annotations

import builtins
import importlib
import inspect
import itertools
from collections.abc import Iterator, Sequence
from types import ModuleType
from typing import Any

from langchain_core.documents import Document

DEFAULT_MODULES: tuple[str, ...] = (
    "asyncio",
    "json",
    "pathlib",
    "collections",
    "itertools",
    "functools",
    "re",
    "dataclasses",
    "typing",
    "contextlib",
    "concurrent.futures",
    "subprocess",
    "logging",
    "argparse",
    "datetime",
    "os.path",
    "shutil",
    "sqlite3",
    "unittest",
    "enum",
)
"""Modules whose docstrings (module, public classes with methods, functions) are included."""


def stdlib_documents(
    max_docs: int | None = None,
    *,
    modules: Sequence[str] = DEFAULT_MODULES,
    include_topics: bool = True,
    include_builtins: bool = True,
) -> list[Document]:
    """The first ``max_docs`` documents of the reference topics, builtins and ``modules``, in
    a fixed order, with ``source`` (also their id), ``title`` and ``format`` metadata."""

    def documents() -> Iterator[Document]:
        if include_topics:
            from pydoc_data.topics import topics

            for name in sorted(topics):
                yield _doc(f"pydoc:topics/{name}", name, topics[name].strip(), "rst")
        if include_builtins:
            yield from _builtin_documents()
        for name in modules:
            yield from _module_documents(name, importlib.import_module(name))

    return list(itertools.islice(documents(), max_docs))


def _builtin_documents() -> Iterator[Document]:
    objects = [(n, getattr(builtins, n)) for n in sorted(dir(builtins)) if not n.startswith("_")]
    chosen = [(n, o) for n, o in objects if inspect.isclass(o) or inspect.isbuiltin(o)]
    for name, obj in sorted(chosen, key=lambda item: not _is_exception(item[1])):  # errors first
        text = _object_text(name, obj, methods=inspect.isclass(obj) and not _is_exception(obj))
        if text:
            yield _doc(f"docstring:builtins.{name}", name, text, "markdown")


def _module_documents(module_name: str, module: ModuleType) -> Iterator[Document]:
    if module.__doc__:
        text = f"# {module_name}\n\n" + inspect.cleandoc(module.__doc__)
        yield _doc(f"docstring:{module_name}", module_name, text, "markdown")
    exported = getattr(module, "__all__", None)  # its own public API, else every public name
    for name in sorted({n for n in exported or dir(module) if not n.startswith("_")}):
        obj = getattr(module, name, None)
        if not (inspect.isclass(obj) or inspect.isroutine(obj)):
            continue
        home = getattr(obj, "__module__", None) or ""
        if exported is None and not home.startswith(module_name.split(".")[0]):
            continue
        qualname = f"{module_name}.{name}"
        text = _object_text(qualname, obj, methods=inspect.isclass(obj))
        if text:
            yield _doc(f"docstring:{qualname}", qualname, text, "markdown")


def _object_text(qualname: str, obj: Any, *, methods: bool) -> str:
    doc = _own_doc(obj)
    if not doc:
        return ""
    parts = [f"# {qualname}", f"{qualname}{_signature(obj)}", doc]
    if methods:
        for name, member in sorted(vars(obj).items()):
            member_doc = _own_doc(member) if _is_method(obj, name, member) else ""
            if member_doc:
                heading = f"{qualname}.{name}"
                parts.append(f"## {heading}\n\n{heading}{_signature(member)}\n\n{member_doc}")
    return "\n\n".join(parts)


def _own_doc(obj: Any) -> str:
    doc = getattr(obj, "__doc__", None)
    return inspect.cleandoc(doc) if isinstance(doc, str) and doc.strip() else ""


def _is_method(owner: type, name: str, member: Any) -> bool:
    # not one patched on at run time (transformers adds Logger.warning_once): the same corpus
    # in every process
    if name.startswith("_") or not (
        inspect.isroutine(member) or isinstance(member, classmethod | staticmethod | property)
    ):
        return False
    function = getattr(member, "__func__", None) or getattr(member, "fget", None) or member
    home = getattr(function, "__module__", None)
    return home is None or home == owner.__module__


def _is_exception(obj: Any) -> bool:
    return isinstance(obj, type) and issubclass(obj, BaseException)


def _signature(obj: Any) -> str:
    # non-literal defaults shown as ...: their reprs (memory addresses) differ between processes
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return ""
    params = [
        p if p.default is p.empty or type(p.default) in _LITERALS else p.replace(default=_ELIDED)
        for p in sig.parameters.values()
    ]
    return str(sig.replace(parameters=params))


class _Elided:
    def __repr__(self) -> str:
        return "..."


_ELIDED = _Elided()
_LITERALS = (int, float, complex, str, bytes, bool, type(None))


def _doc(source: str, title: str, text: str, fmt: str) -> Document:
    return Document(page_content=text, metadata={"source": source, "title": title, "format": fmt})
