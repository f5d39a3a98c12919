"""SQLite connections: the pragmas every process uses, and the functions registered on them."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path

from peewee import SqliteDatabase

from models.store.connecting import BUSY_TIMEOUT_MS
from models.store.functions import anonymized_ip, visitor_key

PRAGMAS: dict[str, str | int] = {
    "journal_mode": "wal",
    # A power cut may cost the last moment of commits; a process crash costs nothing (WAL).
    "synchronous": "normal",
    "busy_timeout": BUSY_TIMEOUT_MS,
    "foreign_keys": 1,
    # 2 MB per connection. Measured in `lanner bench unique` on a 6.6 M-click database: the flusher's
    # CPU per click was the same as with 16 MB (its inserts and the workers' probes land on random
    # leaf pages, which the OS page cache serves either way), and an install's processes kept ~20 MB
    # less. Bulk jobs (an index build, the generator) take a large_cache for their own work.
    "cache_size": -2000,
    "temp_store": "memory",
    # Checkpoints run in the spool flusher, never inside a visitor's request.
    "wal_autocheckpoint": 0,
}


def connect_sqlite(path: Path, *, autocheckpoint: bool = False) -> SqliteDatabase:
    """A connected SQLite database at `path` (models/store/database.py binds `db` to it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    pragmas = dict(PRAGMAS)
    if autocheckpoint:
        pragmas["wal_autocheckpoint"] = 1000
    database = SqliteDatabase(str(path), pragmas=pragmas, check_same_thread=False)
    # The bench's generated clicks and the backfill of migration 0005 compute the key in SQL.
    database.register_function(visitor_key, "lanner_visitor_key", 2, deterministic=True)
    # `lanner privacy anonymize-stored` (models/store/sqlite/privacy.py).
    database.register_function(anonymized_ip, "lanner_anonymized_ip", 1, deterministic=True)
    database.connect()
    return database


def set_cache(conn: sqlite3.Connection, megabytes: int) -> None:
    """This connection's page cache from now on: `megabytes` of it."""
    conn.execute(f"PRAGMA cache_size = {-int(megabytes) * 1024}").close()


@contextlib.contextmanager
def large_cache(conn: sqlite3.Connection, megabytes: int) -> Iterator[None]:
    """A bigger page cache for one bulk job (an index build sorts in it), the usual one after."""
    set_cache(conn, megabytes)
    try:
        yield
    finally:
        conn.execute(f"PRAGMA cache_size = {PRAGMAS['cache_size']}").close()
