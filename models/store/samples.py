"""Stored rows sampled for the measuring scripts (scripts/rollup_cost.py), and the transaction they
measure in: always rolled back, so a script times real writes on a copy of a database and leaves it
as it was. Never on a request's or the flusher's path."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from models.store.rows import Store


class SampleStore(Store):
    """The newest clicks and a discarded transaction, on either dialect (both spell them alike)."""

    SQL_NEWEST_CLICKS = "SELECT {} FROM click ORDER BY id DESC LIMIT ?"  # The caller's columns.
    SQL_BEGIN = "BEGIN"
    SQL_ROLLBACK = "ROLLBACK"

    __slots__ = ()

    def newest_clicks(self, columns: tuple[str, ...], limit: int) -> list[tuple]:
        """`columns` of the newest `limit` clicks, newest first."""
        cursor = self.conn.execute(self.SQL_NEWEST_CLICKS.format(", ".join(columns)), (limit,))
        try:
            return cursor.fetchall()
        finally:
            cursor.close()

    @contextmanager
    def discarded_tx(self) -> Iterator[None]:
        """A transaction that is rolled back whatever its body does: what the body wrote is gone after it."""
        self.conn.execute(self.SQL_BEGIN).close()
        try:
            yield
        finally:
            self.conn.execute(self.SQL_ROLLBACK).close()
