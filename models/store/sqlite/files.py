"""The database file as a whole: an online copy, an integrity check, and a fresh spool position
for a restored copy (models/ops/backup.py decides when and where)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from models.store.sqlite.clicks import ClickStore

# A file that is not an SQLite database, or one that is damaged.
FILE_ERRORS: tuple[type[Exception], ...] = (sqlite3.DatabaseError,)


def copy_database(source_path: Path, target_path: Path) -> None:
    """A consistent snapshot of the live database at `target_path`, as one self-contained file.

    In WAL mode the copy's read transaction blocks no writer; it is one step, since a stepped
    backup restarts whenever the flusher writes.
    """
    source = sqlite3.connect(source_path, timeout=30)
    copy = sqlite3.connect(target_path)
    try:
        source.backup(copy)
        copy.execute("PRAGMA journal_mode = DELETE").close()
    finally:
        copy.close()
        source.close()


def check_lanner_file(path: Path) -> str:
    """SQLite's quick_check verdict ("ok" when sound) of a file holding Lanner's tables; FILE_ERRORS
    if it is not an SQLite database or has no spool position."""
    check = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        (verdict,) = check.execute("PRAGMA quick_check").fetchone()
        check.execute("SELECT 1 FROM spool_position").fetchall()  # Lanner's, not any SQLite file.
    finally:
        check.close()
    return verdict


def start_spool_after(path: Path, now_ms: int) -> None:
    """Move a copy's spool position past every segment number it may know: a restored database
    starts on a fresh spool."""
    connection = sqlite3.connect(path)
    try:
        store = ClickStore(connection)
        segment, _ = store.position()
        store.set_position(segment + 1, 0, now_ms)
        connection.commit()
    finally:
        connection.close()
