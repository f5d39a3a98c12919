"""maintenance: PostgreSQL's counterpart of keeping the SQLite file in shape, and a ping.

What differs: there is no WAL file of Lanner's to checkpoint. A committed transaction is durable on
the server (its own WAL and checkpoints are the server's business), so `checkpoint` does nothing and
answers True: the landed spool segments may be deleted at once. The database's size is the server's
pg_database_size, where SQLite's is the file's (`lanner status`).
"""

from __future__ import annotations

import contextlib

import psycopg

from models.store import maintenance as base
from models.store.postgres.database import PostgresUnavailable
from models.store.rows import fetch_single


class MaintenanceStore(base.MaintenanceStore):
    __slots__ = ()
    dialect = "postgres"
    SQL_DATABASE_BYTES = "SELECT pg_database_size(current_database())"

    def ping(self) -> None:
        """On the raw connection psycopg's own errors arrive, not peewee's: a server that stopped is
        PostgresUnavailable (an OperationalError, as every refusal through peewee is)."""
        try:
            super().ping()
        except psycopg.Error as error:
            raise PostgresUnavailable(error) from error

    def checkpoint(self, *, truncate: bool, busy_timeout_ms: int) -> bool:
        """Nothing to checkpoint: every committed row is already in the database."""
        return True

    def database_bytes(self) -> int:
        return fetch_single(self.conn, self.SQL_DATABASE_BYTES)[0]

    def keep_cache(self, megabytes: int) -> None:
        """The server's memory is its own configuration's: nothing to change for one connection."""

    def large_cache(self, megabytes: int) -> contextlib.AbstractContextManager[None]:
        """The server's memory is its own configuration's: nothing to change for one job."""
        return contextlib.nullcontext()
