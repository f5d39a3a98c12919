"""history on SQLite: what differs from PostgreSQL (models/store/postgres/history.py); the rest is
models/store/history.py's.

One writer at a time: the appender's write transaction (BEGIN IMMEDIATE) already waits for every
inserter and mutation, so neither side takes a lock of its own.
"""

from __future__ import annotations

from models.store import history as base


class HistoryStore(base.HistoryStore):
    __slots__ = ()
    dialect = "sqlite"
    SQL_ROWS_OF = base._SELECT_ROWS + " WHERE id IN ({})"  # {}: one ? per id.

    def rows_of(self, click_ids: list[int]) -> list[tuple]:
        if not click_ids:
            return []
        sql = self.SQL_ROWS_OF.format(",".join("?" * len(click_ids)))
        return self.conn.execute(sql, click_ids).fetchall()

    def lock_watermark(self) -> None:
        pass

    def guard(self) -> None:
        pass
