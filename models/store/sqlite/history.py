"""history on SQLite: what differs from PostgreSQL (models/store/postgres/history.py); the rest is
models/store/history.py's.

One writer at a time: the appender's write transaction (BEGIN IMMEDIATE) already waits for every
inserter and mutation, so neither side takes a lock of its own.
"""

from __future__ import annotations

from models.store import history as base

IDS_PER_STATEMENT = 10_000


class HistoryStore(base.HistoryStore):
    __slots__ = ()
    dialect = "sqlite"
    SQL_ROWS_OF = base._SELECT_ROWS + " WHERE id IN ({})"  # {}: one ? per id.
    SQL_CONVERSION_ROWS_OF = base._SELECT_CONVERSIONS + " WHERE id IN ({})"

    def rows_of(self, click_ids: list[int]) -> list[tuple]:
        """In slices: a build of SQLite may bind no more than 32,766 parameters to a statement."""
        rows: list[tuple] = []
        for at in range(0, len(click_ids), IDS_PER_STATEMENT):
            ids = click_ids[at : at + IDS_PER_STATEMENT]
            rows += self.conn.execute(self.SQL_ROWS_OF.format(",".join("?" * len(ids))), ids).fetchall()
        return rows

    def conversion_rows_of(self, conversion_ids: list[int]) -> list[tuple]:
        rows: list[tuple] = []
        for at in range(0, len(conversion_ids), IDS_PER_STATEMENT):
            ids = conversion_ids[at : at + IDS_PER_STATEMENT]
            sql = self.SQL_CONVERSION_ROWS_OF.format(",".join("?" * len(ids)))
            rows += self.conn.execute(sql, ids).fetchall()
        return rows

    def lock_watermark(self) -> None:
        pass

    def guard(self) -> None:
        pass
