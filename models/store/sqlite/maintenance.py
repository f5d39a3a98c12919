"""Keeping the SQLite file in shape (WAL checkpoints, run by whoever lands the spool), and a ping."""

from __future__ import annotations

from models.store.sqlite.rows import Store, fetch_one


class MaintenanceStore(Store):
    """Checkpoints on one connection (outside any transaction)."""

    __slots__ = ()

    def ping(self) -> None:
        """One round trip: raises if the database cannot be read."""
        self.conn.execute("SELECT 1").fetchall()

    def checkpoint(self, *, truncate: bool, busy_timeout_ms: int) -> bool:
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
                conn.execute(f"PRAGMA busy_timeout = {busy_timeout_ms}").close()  # The usual one.
        return not busy and wal_pages == done_pages
