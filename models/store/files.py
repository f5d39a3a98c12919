"""The database file as a whole: an online copy, an integrity check, and a fresh spool position
for a restored copy (models/ops/backup.py decides when and where)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

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
        check.execute("SELECT 1 FROM migration_history").fetchall()  # Lanner's, not any SQLite file.
    finally:
        check.close()
    return verdict


# Every node's, or the one row of a backup made before migration 0012.
SQL_START_NODES_AFTER = (  # ...and any spool may claim them again.
    "UPDATE spool_node SET segment = segment + 1, byte_offset = 0, updated_at = ?, spool_id = ''"
)
SQL_START_AFTER_0011 = "UPDATE spool_position SET segment = segment + 1, byte_offset = 0, updated_at = ?"
SQL_HAS_NODES = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'spool_node'"


def start_spool_after(path: Path, now_ms: int) -> None:
    """Move a copy's spool positions past every segment number they may know: a restored database
    starts on a fresh spool."""
    connection = sqlite3.connect(path)
    try:
        has_nodes = connection.execute(SQL_HAS_NODES).fetchone() is not None
        connection.execute(SQL_START_NODES_AFTER if has_nodes else SQL_START_AFTER_0011, (now_ms,)).close()
        connection.commit()
    finally:
        connection.close()
