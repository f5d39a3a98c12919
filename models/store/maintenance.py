"""Keeping the database in shape (checkpoints, run by whoever lands the spool), and a ping."""

from __future__ import annotations

from abc import abstractmethod
from contextlib import AbstractContextManager

from models.store.rows import Store


class MaintenanceStore(Store):
    """Checkpoints on one connection (outside any transaction)."""

    __slots__ = ()

    def ping(self) -> None:
        """One round trip: raises if the database cannot be read."""
        self.conn.execute("SELECT 1").fetchall()

    # Each dialect's own (models/store/sqlite/, models/store/postgres/).

    @abstractmethod
    def checkpoint(self, *, truncate: bool, busy_timeout_ms: int) -> bool:
        """Move what is committed into the database proper (SQLite's WAL checkpoint); True when all of
        it is, so the landed spool segments may go."""

    @abstractmethod
    def database_bytes(self) -> int:
        """The database's size (SQLite's: its file's pages, the WAL left out)."""

    @abstractmethod
    def keep_cache(self, megabytes: int) -> None:
        """This connection's page cache from now on (the spool flusher's, which writes the click
        table's indexes all day)."""

    @abstractmethod
    def large_cache(self, megabytes: int) -> AbstractContextManager[None]:
        """Around one bulk job (an index build sorts in the page cache): a bigger cache, then the
        usual one."""
