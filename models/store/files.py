"""The database file as a whole: an online copy, an integrity check, and a fresh spool position
for a restored copy (models/ops/backup.py decides when and where)."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

from models.store.sqlite.meta import MetaStore

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


# -- the columnar history a copy goes with (docs/analytics.md, Operations) ------------------------------

SQL_COPY_POSITION = "SELECT position FROM history_state WHERE id = 1"
SQL_COPY_MAX_ID = "SELECT COALESCE(MAX(id), 0) FROM click"
SQL_COPY_HELD = "SELECT COUNT(*) FROM click WHERE id > ? AND id <= ?"
SQL_COPY_SET_POSITION = "UPDATE history_state SET position = ? WHERE id = 1"
# "<history position> <history clicks>" of the history file a backup was taken with.
BACKUP_HISTORY_KEY = "backup_history"


@dataclass(frozen=True)
class CopyHistory:
    """What a database copy says about the columnar history."""

    position: int  # history_state.position: the highest click id it trusts the history with.
    max_click_id: int
    pruned_before: int | None  # Unix ms; clicks before it only the history held.
    backup_position: int | None  # The history file taken with the backup: its position and clicks
    backup_clicks: int | None  # (None: the backup was taken without one).

    def pruned_between(self, path: Path, after: int, up_to: int) -> int:
        """Click ids in (after, up_to] the copy no longer holds: pruned, so only a history had them
        (on PostgreSQL a sequence's unused ids count too: at most this many)."""
        connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            held = connection.execute(SQL_COPY_HELD, (after, up_to)).fetchone()[0]
        finally:
            connection.close()
        return max(0, up_to - after - held)


def history_of_copy(path: Path) -> CopyHistory | None:
    """The history facts of a database copy; None for one made before the history (migration 0021)."""
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        try:
            (position,) = connection.execute(SQL_COPY_POSITION).fetchone()
        except sqlite3.OperationalError:  # No history_state table.
            return None
        (max_id,) = connection.execute(SQL_COPY_MAX_ID).fetchone()
        meta = MetaStore(connection)
        pruned, taken = meta.pruned_before(), meta.get(BACKUP_HISTORY_KEY)
    finally:
        connection.close()
    backup_position, backup_clicks = (int(n) for n in taken.split()) if taken else (None, None)
    return CopyHistory(position, max_id, pruned, backup_position, backup_clicks)


def record_backup_history(path: Path, position: int, clicks: int) -> None:
    """Write into a backup copy which history file goes with it (its position and clicks)."""
    connection = sqlite3.connect(path)
    try:
        MetaStore(connection).put(BACKUP_HISTORY_KEY, f"{position} {clicks}")
        connection.commit()
    finally:
        connection.close()


def settle_restored_history(path: Path, position: int | None) -> None:
    """A restored copy: forget which history file its backup went with; with `position`, trust the
    history only up to it (the next append copies the clicks after it again)."""
    connection = sqlite3.connect(path)
    try:
        MetaStore(connection).forget(BACKUP_HISTORY_KEY)
        if position is not None:
            connection.execute(SQL_COPY_SET_POSITION, (position,)).close()
        connection.commit()
    finally:
        connection.close()
