"""Keeping the SQLite file in shape: WAL checkpoints, run by whoever lands the spool."""

from __future__ import annotations

import sqlite3

from models.store.sqlite.rows import fetch_one


class MaintenanceStore:
    """Checkpoints on one connection (outside any transaction)."""

    __slots__ = ("conn", "busy_timeout_ms")

    def __init__(self, conn: sqlite3.Connection, busy_timeout_ms: int) -> None:
        self.conn = conn
        self.busy_timeout_ms = busy_timeout_ms  # The connection's own, put back after a TRUNCATE.

    def checkpoint(self, *, truncate: bool) -> bool:
        """A PASSIVE or TRUNCATE checkpoint; True when every WAL frame is in the database file.

        TRUNCATE waits for readers while holding the write lock: a long report in the admin worker
        would stall every writer behind it (postbacks in the web workers). Without a busy timeout
        it gives up at once (busy = 1), after a PASSIVE pass, and the caller tries again later.
        """
        conn = self.conn
        if truncate:
            conn.execute("PRAGMA busy_timeout = 0").close()
        try:
            busy, wal_pages, done_pages = fetch_one(
                conn, f"PRAGMA wal_checkpoint({'TRUNCATE' if truncate else 'PASSIVE'})"
            )
        finally:
            if truncate:
                conn.execute(f"PRAGMA busy_timeout = {self.busy_timeout_ms}").close()
        return not busy and wal_pages == done_pages
