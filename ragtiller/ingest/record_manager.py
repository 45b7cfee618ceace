"""A persistent LangChain ``RecordManager`` on sqlite3 (``SQLRecordManager`` needs SQLAlchemy),
so an incremental sync into Pinecone or any store remembers what it wrote between runs."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain_core.indexing import RecordManager

_SCHEMA = """
CREATE TABLE IF NOT EXISTS records (
    namespace TEXT NOT NULL,
    key TEXT NOT NULL,
    group_id TEXT,
    updated_at REAL NOT NULL,
    PRIMARY KEY (namespace, key)
);
CREATE INDEX IF NOT EXISTS records_group ON records (namespace, group_id);
CREATE TABLE IF NOT EXISTS tenancy (
    namespace TEXT PRIMARY KEY,
    tenanted INTEGER NOT NULL
);
"""
_BATCH = 500  # keys per SQL statement (SQLite allows 999 host parameters by default)


class SQLiteRecordManager(RecordManager):
    """Which record keys were written to a store, in one SQLite file, safe to share between
    threads; ``namespace`` separates the stores of one file."""

    def __init__(self, namespace: str, path: str | Path) -> None:
        super().__init__(namespace)
        self.path = str(path)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)

    def create_schema(self) -> None:
        with self._lock:
            self._db.executescript(_SCHEMA)

    def get_time(self) -> float:
        return time.time()

    def update(
        self,
        keys: Sequence[str],
        *,
        group_ids: Sequence[str | None] | None = None,
        time_at_least: float | None = None,
    ) -> None:
        if group_ids is not None and len(group_ids) != len(keys):
            raise ValueError(f"got {len(group_ids)} group_ids for {len(keys)} keys")
        now = self.get_time()
        if time_at_least is not None and time_at_least > now:
            raise ValueError(f"time_at_least {time_at_least} is after the current time {now}")
        groups = list(group_ids) if group_ids is not None else [None] * len(keys)
        self._transaction(
            "INSERT INTO records (namespace, key, group_id, updated_at) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (namespace, key) DO UPDATE SET group_id = excluded.group_id, "
            "updated_at = excluded.updated_at",
            [(self.namespace, k, g, now) for k, g in zip(keys, groups, strict=True)],
        )

    def exists(self, keys: Sequence[str]) -> list[bool]:
        found: set[str] = set()
        with self._lock:
            for first in range(0, len(keys), _BATCH):
                batch = list(keys[first : first + _BATCH])
                marks = ",".join("?" * len(batch))
                cursor = self._db.execute(
                    f"SELECT key FROM records WHERE namespace = ? AND key IN ({marks})",
                    [self.namespace, *batch],
                )
                found.update(row[0] for row in cursor)
        return [k in found for k in keys]

    def list_keys(
        self,
        *,
        before: float | None = None,
        after: float | None = None,
        group_ids: Sequence[str] | None = None,
        limit: int | None = None,
    ) -> list[str]:
        clauses = ["namespace = ?"]
        params: list[object] = [self.namespace]
        if before is not None:
            clauses.append("updated_at < ?")
            params.append(before)
        if after is not None:
            clauses.append("updated_at > ?")
            params.append(after)
        keys: list[str] = []
        groups = list(group_ids) if group_ids is not None else [None]
        with self._lock:
            for first in range(0, len(groups), _BATCH):
                where = list(clauses)
                args = list(params)
                if group_ids is not None:
                    batch = groups[first : first + _BATCH]
                    where.append(f"group_id IN ({','.join('?' * len(batch))})")
                    args.extend(batch)
                sql = f"SELECT key FROM records WHERE {' AND '.join(where)} ORDER BY rowid"
                keys.extend(row[0] for row in self._db.execute(sql, args))
        return keys[:limit] if limit else keys

    def delete_keys(self, keys: Sequence[str]) -> None:
        rows = [(self.namespace, k) for k in keys]
        self._transaction("DELETE FROM records WHERE namespace = ? AND key = ?", rows)

    def _transaction(self, sql: str, rows: Sequence[tuple[object, ...]]) -> None:
        with self._lock, self._db:
            self._db.execute("BEGIN")
            self._db.executemany(sql, rows)

    def tenanted(self) -> bool | None:
        """Whether the store's chunks carry a ``tenant`` key (None: not recorded)."""
        with self._lock:
            row = self._db.execute(
                "SELECT tenanted FROM tenancy WHERE namespace = ?", (self.namespace,)
            ).fetchone()
        return None if row is None else bool(row[0])

    def record_tenanted(self, tenanted: bool) -> None:
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO tenancy (namespace, tenanted) VALUES (?, ?)",
                (self.namespace, int(tenanted)),
            )

    def close(self) -> None:
        with self._lock:
            self._db.close()

    async def acreate_schema(self) -> None:
        await asyncio.to_thread(self.create_schema)

    async def aget_time(self) -> float:
        return self.get_time()

    async def aupdate(self, *args: Any, **kwargs: Any) -> None:
        await asyncio.to_thread(self.update, *args, **kwargs)

    async def aexists(self, keys: Sequence[str]) -> list[bool]:
        return await asyncio.to_thread(self.exists, keys)

    async def alist_keys(self, **kwargs: Any) -> list[str]:
        return await asyncio.to_thread(self.list_keys, **kwargs)

    async def adelete_keys(self, keys: Sequence[str]) -> None:
        await asyncio.to_thread(self.delete_keys, keys)
