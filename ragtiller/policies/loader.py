"""Load a policy from YAML, with errors that name the file and the field path, never a string
value from the file (it may hold a credential). A per-run ``policy`` may come from a remote
client, so reading is bounded: regular files only, at most :data:`MAX_POLICY_BYTES`, YAML
without unbounded alias expansion or nesting."""

from __future__ import annotations

import logging
import os
import re
import stat
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any, NoReturn

import yaml
from pydantic import ValidationError
from yaml.composer import ComposerError
from yaml.events import AliasEvent, Event
from yaml.nodes import Node

from ragtiller.errors import InputError, PolicyError
from ragtiller.policies.schema import RetrievalPolicy

logger = logging.getLogger(__name__)

DEFAULT_POLICY = "default"
POLICY_DIR_ENV = "RAGTILLER_POLICY_DIR"  # the operator's directory of extra per-run policies
MAX_POLICY_BYTES = 1024 * 1024  # a larger file is refused unread (the shipped default: 1.4 kB)
MAX_YAML_DEPTH = 20
MAX_YAML_ALIASES = 100
MAX_YAML_NODES = 10_000  # with every alias expanded (the shipped default has 23)
MAX_LISTED_ERRORS = 20
POLICY_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")  # a per-run name: no separators


def shipped_policies() -> list[str]:
    """Names of the policies in ``policies/shipped/*.yaml``."""
    folder = resources.files("ragtiller.policies").joinpath("shipped")
    return sorted(
        p.name.removesuffix(".yaml") for p in folder.iterdir() if p.name.endswith(".yaml")
    )


_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a device"),
    (stat.S_ISBLK, "a device"),
)


def _check_file(info: os.stat_result, source: str) -> None:
    if not stat.S_ISREG(info.st_mode):
        kind = next((name for test, name in _KINDS if test(info.st_mode)), "not a regular file")
        raise PolicyError(f"policy file {source} is {kind}, not a regular file")
    if info.st_size > MAX_POLICY_BYTES:
        raise PolicyError(
            f"policy file {source} is {info.st_size} bytes, over the {MAX_POLICY_BYTES}-byte limit"
        )


def read_policy_file(file: Path, source: str | None = None) -> str:
    """The text of a regular policy file within the size limit, its type checked before opening
    (a FIFO would block, a device never ends) and again on the non-blocking descriptor."""
    source = str(file) if source is None else source
    try:
        _check_file(os.stat(file), source)
        flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
        with os.fdopen(os.open(file, flags), "rb") as handle:
            _check_file(os.fstat(handle.fileno()), source)
            data = handle.read(MAX_POLICY_BYTES + 1)
    except FileNotFoundError as e:
        raise PolicyError(
            f"policy file {source} does not exist; shipped policies: {', '.join(shipped_policies())}"
        ) from e
    except OSError as e:
        raise PolicyError(
            f"cannot read policy file {source}: {e.strerror or type(e).__name__}"
        ) from e
    if len(data) > MAX_POLICY_BYTES:  # it grew after the stat
        raise PolicyError(f"policy file {source} is over the {MAX_POLICY_BYTES}-byte limit")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise PolicyError(
            f"policy file {source} is not UTF-8 text (bad byte at offset {e.start})"
        ) from e


class BoundedLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` refusing deep nesting and many aliases, and counting each alias as its
    expansion (what the schema check walks), so a "billion laughs" file is refused early."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._aliases = 0
        self._expanded = 0
        self._sizes: dict[int, int] = {}  # id(anchored node) -> its expanded node count

    def _count(self, nodes: int, mark: Any) -> None:
        self._expanded += nodes
        if self._expanded > MAX_YAML_NODES:
            _refuse(
                f"more than {MAX_YAML_NODES} nodes (counting each alias as its expansion)", mark
            )

    def compose_node(self, parent: Node | None, index: int) -> Node | None:
        event: Event = self.peek_event()  # type: ignore[no-untyped-call]
        mark: Any = event.start_mark  # a yaml.error.Mark (this loader is pure Python)
        if isinstance(event, AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_YAML_ALIASES:
                _refuse(f"more than {MAX_YAML_ALIASES} aliases", mark)
            node = super().compose_node(parent, index)
            size = self._sizes.get(id(node))
            if size is None:
                _refuse("an alias refers to a node that holds it", mark)
            self._count(size, mark)
            return node
        self._depth += 1
        if self._depth > MAX_YAML_DEPTH:
            _refuse(f"nested deeper than {MAX_YAML_DEPTH} levels", mark)
        before = self._expanded
        self._count(1, mark)
        try:
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        if getattr(event, "anchor", None) is not None:
            self._sizes[id(node)] = self._expanded - before
        return node


def _refuse(problem: str, mark: Any) -> NoReturn:
    raise ComposerError(None, None, problem, mark)


_QUOTED = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"")


def _unquoted(text: str) -> str:
    """``text`` with quoted fragments from the file masked; PyYAML's token names such as
    ``'<scalar>'`` and single punctuation marks are kept."""

    def mask(match: re.Match[str]) -> str:
        inner = match.group()[1:-1]
        keep = re.fullmatch(r"<[a-z ]+>", inner) or re.fullmatch(r"[^\w\s\\]{1,3}", inner)
        return match.group() if keep else "(value not shown)"

    return _QUOTED.sub(mask, text)


def _yaml_problem(error: Exception) -> str:
    """Where and what a YAML error is, without PyYAML's snippet of the file."""
    if isinstance(error, yaml.MarkedYAMLError):
        mark = error.problem_mark or error.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        what = "; ".join(part for part in (error.context, error.problem) if part)
        return where + _unquoted(what or "syntax error")
    if isinstance(error, yaml.reader.ReaderError):
        return f"character {error.position}: a control character YAML does not allow"
    # a scalar the constructor cannot build, e.g. an int of more than 4300 digits
    return f"a value YAML cannot construct ({type(error).__name__})"


def load_yaml(text: str, *, source: str = "<policy>") -> Any:
    """Parse policy YAML with :class:`BoundedLoader`; an empty document is ``{}``."""
    loader: BoundedLoader | None = None
    try:
        loader = BoundedLoader(text)  # the reader checks every character here
        return loader.get_single_data() or {}
    except (yaml.YAMLError, ValueError) as e:
        raise PolicyError(
            f"invalid retrieval policy {source}: not valid YAML: {_yaml_problem(e)}"
        ) from e
    finally:
        if loader is not None:
            loader.dispose()


def _without_values(message: str, value: Any) -> str:
    """A validator's message with the strings in ``value`` (up to 1,000; not its keys) masked."""
    found: set[str] = set()
    stack = [value]
    while stack and len(found) < 1000:
        item = stack.pop()
        if isinstance(item, str):
            found.add(item)
        elif isinstance(item, Mapping):
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    for text in sorted(found, key=len, reverse=True):
        for shown in (repr(text), f'"{text}"') + ((text,) if len(text) >= 8 else ()):
            message = message.replace(shown, "(value not shown)")
    return message


def _format_errors(source: str, error: ValidationError) -> str:
    items = error.errors()
    lines = [f"invalid retrieval policy {source}:"]
    for item in items[:MAX_LISTED_ERRORS]:
        message = _without_values(item["msg"], item.get("input"))
        parts = [p if len(p) <= 40 else f"{p[:40]}..." for p in map(str, item["loc"])]
        lines.append(f"  {'.'.join(parts) or '<root>'}: {message}")
    if len(items) > MAX_LISTED_ERRORS:
        lines.append(f"  ... and {len(items) - MAX_LISTED_ERRORS} more errors")
    return "\n".join(lines)


def parse_policy(data: Any, *, source: str = "<policy>") -> RetrievalPolicy:
    """Validate loaded policy data; a :class:`PolicyError` names ``source`` and each bad field."""
    if not isinstance(data, dict):
        raise PolicyError(
            f"invalid retrieval policy {source}: expected a mapping at the top level, got {type(data).__name__}"
        )
    try:
        return RetrievalPolicy.model_validate(data)
    except ValidationError as e:
        raise PolicyError(_format_errors(source, e)) from e


def load_policy(path: str | Path | None = None) -> RetrievalPolicy:
    """A YAML file (the operator's choice, read as given) or a shipped policy's name; None: the
    default. A :class:`PolicyError` names the file and line or field, never a value from it."""
    name = DEFAULT_POLICY if path is None else str(path)
    if path is None or (name in shipped_policies() and not Path(name).exists()):
        return _shipped(name)
    return _parse(read_policy_file(Path(path)), str(path))


def _shipped(name: str) -> RetrievalPolicy:
    text = resources.files("ragtiller.policies").joinpath("shipped", f"{name}.yaml")
    return _parse(text.read_text("utf-8"), f"<shipped policy {name!r}>")


def _parse(text: str, source: str) -> RetrievalPolicy:
    return parse_policy(load_yaml(text, source=source), source=source)


def policy_dir(env: Mapping[str, str] = os.environ) -> Path | None:
    value = env.get(POLICY_DIR_ENV, "").strip()
    return Path(value) if value else None


def _allowed(directory: Path | None) -> str:
    """The allowed names a refusal tells a remote caller: never the directory's (its names may be
    customers'; listing it would cost a read per refusal)."""
    shipped = ", ".join(shipped_policies())
    if directory is None:
        return f"{shipped} (set {POLICY_DIR_ENV} to allow more)"
    return f"{shipped}, or one the operator added to {POLICY_DIR_ENV}"


def load_allowed_policy(name: str, directory: Path | None = None) -> RetrievalPolicy:
    """The per-run policy ``name``: a shipped one or ``directory/<name>.yaml``, never a path a
    caller chose. A file taking a shipped name is refused, not ignored or preferred; errors may
    reach a remote caller, so they name the policy, never the server's path."""
    if not POLICY_NAME.fullmatch(name):
        raise InputError(
            f"a per-run policy is a policy name, not a path; allowed: {_allowed(directory)}"
        )
    candidate = directory / f"{name}.yaml" if directory is not None else None
    source = f"{name!r} in {POLICY_DIR_ENV}"
    if name in shipped_policies():
        if candidate is not None and os.path.lexists(candidate):
            raise PolicyError(
                f"the policy {source} takes the name of the shipped policy {name!r}; rename "
                f"the file (per-run policy names must be unique)"
            )
        return _shipped(name)
    if candidate is None or not os.path.lexists(candidate):
        if directory is not None and not directory.is_dir():
            logger.warning(
                "%s=%s is not a directory: no operator policy", POLICY_DIR_ENV, directory
            )
        raise InputError(f"unknown policy {name!r}; allowed: {_allowed(directory)}")
    return _parse(read_policy_file(candidate, source=source), source)
