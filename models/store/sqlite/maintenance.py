"""maintenance on SQLite: what differs from PostgreSQL (models/store/postgres/maintenance.py); the rest is
models/store/maintenance.py's: WAL checkpoints of the file."""

from __future__ import annotations

from contextlib import AbstractContextManager

from models.store import maintenance as base
from models.store.rows import fetch_single
from models.store.sqlite.database import large_cache, set_cache


class MaintenanceStore(base.MaintenanceStore):
    __slots__ = ()
    dialect = "sqlite"
    SQL_DATABASE_BYTES = "SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()"

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
            busy, wal_pages, done_pages = fetch_single(
                conn, f"PRAGMA wal_checkpoint({'TRUNCATE' if truncate else 'PASSIVE'})"
            )
        finally:
            if truncate:
                conn.execute(f"PRAGMA busy_timeout = {busy_timeout_ms}").close()  # The usual one.
        return not busy and wal_pages == done_pages

    def database_bytes(self) -> int:
        return fetch_single(self.conn, self.SQL_DATABASE_BYTES)[0]

    def keep_cache(self, megabytes: int) -> None:
        set_cache(self.conn, megabytes)

    def large_cache(self, megabytes: int) -> AbstractContextManager[None]:
        return large_cache(self.conn, megabytes)
