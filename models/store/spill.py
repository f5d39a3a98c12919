"""The private SQLite files a web worker holds its older unflushed clicks in: SpillFile for the
recent-visitor index (models/clicks/visitors.py), LanderSpillFile for the lander step's clicks and LP
clicks (models/clicks/funnels.py).

Not the tracker's database: one file of each per worker process, created in the spool directory and
unlinked at once, so no other process sees it and a crash takes it along.
"""

from __future__ import annotations

import itertools
import os
import sqlite3
from collections.abc import Iterable
from pathlib import Path

SPILL_CACHE_KB = 1024  # SQLite page cache of the file: the only memory its rows take.
# Rows per transaction: its rollback journal is in memory (a page per row at most), so a write the
# disk refuses is undone cleanly.
SPILL_TRANSACTION_ROWS = 256
SPILL_ERRORS: tuple[type[Exception], ...] = (sqlite3.Error, OSError)  # A file the disk refuses.

SQL_CREATE_HELD = """
CREATE TABLE held (
    visitor_key INTEGER NOT NULL,
    campaign_id INTEGER NOT NULL,
    stream_id INTEGER NOT NULL,
    offer_id INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (visitor_key, campaign_id, stream_id, offer_id)
) WITHOUT ROWID
"""
# Ids start at 1: 0 stands for NULL, which a primary key cannot hold.
SQL_HOLD = (
    "INSERT INTO held VALUES (?, ?, ?, ?, ?) "
    "ON CONFLICT DO UPDATE SET created_at = max(created_at, excluded.created_at)"
)
SQL_HELD = "SELECT campaign_id, stream_id, offer_id, created_at FROM held WHERE visitor_key = ?"


def _open_private(path: Path, schema: tuple[str, ...]) -> sqlite3.Connection:
    """A new SQLite file at `path` with `schema`, unlinked once open: only this connection sees it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)  # A dead process's name (pids are reused); never its data.
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        # Nothing to make durable: the file lives as long as this connection (a crash takes it along).
        for pragma in ("journal_mode = MEMORY", "synchronous = OFF", "locking_mode = EXCLUSIVE"):
            conn.execute(f"PRAGMA {pragma}").close()
        conn.execute(f"PRAGMA cache_size = -{SPILL_CACHE_KB}").close()
        for statement in schema:
            conn.execute(statement).close()
    except sqlite3.Error:
        conn.close()
        raise
    finally:
        path.unlink(missing_ok=True)
    return conn


def _write_chunks(conn: sqlite3.Connection, sql: str, rows: Iterable[tuple]) -> None:
    """executemany in transactions of SPILL_TRANSACTION_ROWS; a failed one is rolled back whole."""
    rows = iter(rows)
    while chunk := list(itertools.islice(rows, SPILL_TRANSACTION_ROWS)):
        conn.execute("BEGIN").close()
        try:
            conn.executemany(sql, chunk).close()
            conn.execute("COMMIT").close()
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK").close()
            raise


class SpillFile:
    """The on-disk tier: (campaign, stream, offer, latest created_at) per visitor
    (models/clicks/visitors.py)."""

    def __init__(self, directory: Path) -> None:
        self.conn = _open_private(directory / f"held.{os.getpid()}.db", (SQL_CREATE_HELD,))

    def hold(self, rows: Iterable[tuple[int, int, int, int, int]]) -> None:
        """Upsert the rows; on failure some may be in and the rest not (writing them again is harmless)."""
        _write_chunks(self.conn, SQL_HOLD, rows)

    def held(self, key: int) -> list[tuple[int, int | None, int | None, int]]:
        return [
            (campaign, stream or None, offer or None, created)
            for campaign, stream, offer, created in self.conn.execute(SQL_HELD, (key,))
        ]

    def close(self) -> None:
        self.conn.close()


# The lander step (models/clicks/funnels.py): a journal position packed into one int
# (models.clicks.visitors.packed_position), indexed so that what landed goes in one range delete.
SQL_CREATE_LANDER_CLICK = """
CREATE TABLE lander_click (
    subid TEXT PRIMARY KEY,
    position INTEGER NOT NULL
) WITHOUT ROWID
"""
SQL_CREATE_LP_CLICK = """
CREATE TABLE lp_click (
    subid TEXT PRIMARY KEY,
    position INTEGER NOT NULL,
    offer_id INTEGER,
    location TEXT NOT NULL
) WITHOUT ROWID
"""
SQL_INDEX_LANDER_CLICK = "CREATE INDEX lander_click_position ON lander_click (position)"
SQL_INDEX_LP_CLICK = "CREATE INDEX lp_click_position ON lp_click (position)"
SQL_HOLD_LANDER_CLICK = "INSERT OR REPLACE INTO lander_click VALUES (?, ?)"
SQL_HOLD_LP_CLICK = "INSERT OR REPLACE INTO lp_click VALUES (?, ?, ?, ?)"
SQL_LANDER_CLICK = "SELECT position FROM lander_click WHERE subid = ?"
SQL_LP_CLICK = "SELECT position, offer_id, location FROM lp_click WHERE subid = ?"
SQL_FORGET_LANDER_CLICKS = "DELETE FROM lander_click WHERE position < ?"
SQL_FORGET_LP_CLICKS = "DELETE FROM lp_click WHERE position < ?"
SQL_CLEAR_LANDER_CLICKS = "DELETE FROM lander_click"  # No WHERE: SQLite drops the pages in one go.
SQL_CLEAR_LP_CLICKS = "DELETE FROM lp_click"


class LanderSpillFile:
    """The on-disk tier of the lander step: unflushed clicks sent to a lander (subid -> packed journal
    position) and LP clicks (subid -> position, offer, Location), models/clicks/funnels.py."""

    def __init__(self, directory: Path) -> None:
        self.conn = _open_private(
            directory / f"funnels.{os.getpid()}.db",
            (SQL_CREATE_LANDER_CLICK, SQL_CREATE_LP_CLICK, SQL_INDEX_LANDER_CLICK, SQL_INDEX_LP_CLICK),
        )

    def hold_clicks(self, rows: Iterable[tuple[str, int]]) -> None:
        """Write (subid, position) rows; on failure some may be in and the rest not (harmless again)."""
        _write_chunks(self.conn, SQL_HOLD_LANDER_CLICK, rows)

    def hold_lp_clicks(self, rows: Iterable[tuple[str, int, int | None, str]]) -> None:
        """Write (subid, position, offer_id, location) rows, as hold_clicks."""
        _write_chunks(self.conn, SQL_HOLD_LP_CLICK, rows)

    def click(self, subid: str) -> int | None:
        """The packed journal position of the held lander click `subid`, or None."""
        cursor = self.conn.execute(SQL_LANDER_CLICK, (subid,))
        try:
            row = cursor.fetchone()
        finally:
            cursor.close()
        return row[0] if row is not None else None

    def lp_click(self, subid: str) -> tuple[int, int | None, str] | None:
        """(packed position, offer_id, location) of the held LP click `subid`, or None."""
        cursor = self.conn.execute(SQL_LP_CLICK, (subid,))
        try:
            row = cursor.fetchone()
        finally:
            cursor.close()
        return tuple(row) if row is not None else None

    def forget_clicks(self, before: int | None) -> int:
        """Delete the lander clicks before the packed position `before` (None: all of them); how many."""
        return self._forget(SQL_CLEAR_LANDER_CLICKS, SQL_FORGET_LANDER_CLICKS, before)

    def forget_lp_clicks(self, before: int | None) -> int:
        """Delete the LP clicks before the packed position `before` (None: all of them); how many."""
        return self._forget(SQL_CLEAR_LP_CLICKS, SQL_FORGET_LP_CLICKS, before)

    def _forget(self, clear: str, forget: str, before: int | None) -> int:
        cursor = self.conn.execute(clear) if before is None else self.conn.execute(forget, (before,))
        try:
            return cursor.rowcount
        finally:
            cursor.close()

    def close(self) -> None:
        self.conn.close()
