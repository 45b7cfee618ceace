"""The seal key: the environment's, else one per machine kept in a 0600 file, else one per process.

The attacks the seal stops are in ``test_scope_attacks.py``; these tests are about its key.
"""

from __future__ import annotations

import logging
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from ragtiller.core import seal as seal_module
from ragtiller.core.seal import KEY_ENV, machine_key, seal, seal_key, verifies
from ragtiller.errors import ConfigurationError


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
