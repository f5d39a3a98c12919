"""The private SQLite file a web worker holds its older unflushed clicks in (models/clicks/visitors.py).

Not the tracker's database: one file per worker process, created in the spool directory and
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


class SpillFile:
    """The on-disk tier: (campaign, stream, offer, latest created_at) per visitor (models/clicks/visitors.py)."""

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"held.{os.getpid()}.db"
        path.unlink(missing_ok=True)  # A dead process's name (pids are reused); never its data.
        self.conn = sqlite3.connect(path, isolation_level=None)
        try:
            # Nothing to make durable: the file lives as long as this connection (a crash takes it along).
            for pragma in ("journal_mode = MEMORY", "synchronous = OFF", "locking_mode = EXCLUSIVE"):
                self.conn.execute(f"PRAGMA {pragma}").close()
            self.conn.execute(f"PRAGMA cache_size = -{SPILL_CACHE_KB}").close()
            self.conn.execute(SQL_CREATE_HELD).close()
        except sqlite3.Error:
            self.conn.close()
            raise
        finally:
            path.unlink(missing_ok=True)

    def hold(self, rows: Iterable[tuple[int, int, int, int, int]]) -> None:
        """Upsert the rows; on failure some may be in and the rest not (writing them again is harmless)."""
        conn = self.conn
        rows = iter(rows)
        while chunk := list(itertools.islice(rows, SPILL_TRANSACTION_ROWS)):
            conn.execute("BEGIN").close()
            try:
                conn.executemany(SQL_HOLD, chunk).close()
                conn.execute("COMMIT").close()
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK").close()
                raise

    def held(self, key: int) -> list[tuple[int, int | None, int | None, int]]:
        return [
            (campaign, stream or None, offer or None, created)
            for campaign, stream, offer, created in self.conn.execute(SQL_HELD, (key,))
        ]

    def close(self) -> None:
        self.conn.close()
