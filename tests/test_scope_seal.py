"""The seal key (the environment's, else one per machine kept in a 0600 file, else one per
process), and two doors the attacks of ``test_scope_attacks.py`` leave out: erasing a thread's
scope, and a seal taken to another thread.
"""

from __future__ import annotations

import logging
import re
import stat
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document
from langgraph.checkpoint.memory import InMemorySaver

from ragtiller.core import seal as seal_module
from ragtiller.core.seal import KEY_ENV, machine_key, seal, seal_key, verifies
from ragtiller.errors import ConfigurationError, InputError
from ragtiller.graph import build_graph
from ragtiller.ingest import build_index
from ragtiller.models import HashingEmbedder
from ragtiller.nodes.scope import SENT_FROM_OUTSIDE

Q = "which port does the server listen on"


@pytest.fixture
def fresh_key(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """A process that has not read its key yet, whose machine key file would be in tmp_path."""
    path = tmp_path / "data" / "scope.key"
    monkeypatch.delenv(KEY_ENV, raising=False)
    monkeypatch.setattr(seal_module, "key_file", lambda: path)
    seal_key.cache_clear()
    yield path
    seal_key.cache_clear()


def test_the_machine_key_is_made_once_readable_by_its_owner_only(fresh_key: Path) -> None:
    key = seal_key()
    assert fresh_key.read_bytes() == key and len(key) == 32
    assert stat.S_IMODE(fresh_key.stat().st_mode) == 0o600
    assert list(fresh_key.parent.iterdir()) == [fresh_key]  # no draft left behind
    seal_key.cache_clear()  # a restart reads the same key: a sealed thread still verifies
    assert seal_key() == key and machine_key(fresh_key) == key


def test_the_environments_key_wins_and_a_short_one_is_refused(
    fresh_key: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, "k" * 32)
    record = {"kind": "turn", "thread": "t1", "tenant": "acme"}
    sealed = seal(record)
    assert seal_key() == b"k" * 32 and not fresh_key.exists()
    assert verifies(record, sealed) and not verifies({**record, "tenant": "globex"}, sealed)
    seal_key.cache_clear()
    monkeypatch.setenv(KEY_ENV, "short")
    with pytest.raises(ConfigurationError, match="at least 32 characters, got 5"):
        seal_key()


def test_without_a_usable_data_directory_the_process_makes_its_own_key(
    fresh_key: Path, caplog: pytest.LogCaptureFixture
) -> None:
    fresh_key.parent.write_text("a file where the data directory should be", "utf-8")
    with caplog.at_level(logging.WARNING, logger="ragtiller.core.seal"):
        key = seal_key()
    assert len(key) == 32 and fresh_key.parent.is_file()
    assert "this process uses its own key" in caplog.text


def test_what_is_not_a_seal_never_verifies() -> None:
    record = {"kind": "turn", "thread": "", "tenant": None}
    for given in (None, 7, "", "é" * 64, seal(record).upper()):
        assert not verifies(record, given)
    assert not verifies({"filter": float("nan")}, seal(record))


# --- the seal through the graph --------------------------------------------------------------


@pytest.fixture(scope="module")
def graph() -> Any:
    docs = [
        Document("ZEBRAFISH: the acme server listens on port 7000.", metadata={"tenant": "acme"}),
        Document(
            "PLATYPUS: the globex server listens on port 8000.", metadata={"tenant": "globex"}
        ),
    ]
    index = build_index(docs, embedder=HashingEmbedder(dim=64), progress=False)
    return build_graph(index=index, checkpointer=InMemorySaver())


def test_a_threads_scope_cannot_be_erased(graph: Any) -> None:
    """Erased, the thread would take a globex turn and stream it acme's answers."""
    config: Any = {"configurable": {"thread_id": uuid.uuid4().hex}}
    graph.invoke({"query": Q}, config, context={"tenant": "acme"})
    with pytest.raises(InputError, match="never erased"):
        graph.update_state(config, {"scope": None})
    with pytest.raises(InputError, match="this thread was started with another tenant"):
        graph.invoke({"query": Q}, config, context={"tenant": "globex"})


def test_a_sealed_route_does_not_verify_on_another_thread(graph: Any) -> None:
    """A seal is bound to its thread: a route copied from one paused thread to another (even
    of the same tenant) is refused there."""
    first, second = ({"configurable": {"thread_id": uuid.uuid4().hex}} for _ in range(2))
    for config in (first, second):
        graph.invoke({"query": Q, "tenant": "acme"}, config, interrupt_before=["embed"])
    route = graph.get_state(first).values["route"]
    graph.update_state(second, {"route": route})
    with pytest.raises(InputError, match=re.escape(SENT_FROM_OUTSIDE)):
        graph.invoke(None, second)
    assert "ZEBRAFISH" in graph.invoke(None, first)["context"]
