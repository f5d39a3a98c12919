"""generated on SQLite: what differs from PostgreSQL (models/store/postgres/generated.py); the rest is
models/store/generated.py's."""

from __future__ import annotations

from contextlib import AbstractContextManager

from models.store import generated as base
from models.store.clicks import SQL_INSERT_CLICK_0004
from models.store.sqlite.clicks import SQL_INSERT_CLICK
from models.store.sqlite.database import large_cache


class GeneratedStore(base.GeneratedStore):
    __slots__ = ()
    dialect = "sqlite"
    SQL_CLICK_COLUMNS = "PRAGMA table_info(click)"  # (cid, name, ...) per column.
    SQL_OPTIMIZE = "PRAGMA optimize"

    def _inserted(self, sql: str, params: tuple) -> int:
        cursor = self.conn.execute(sql, params)
        cursor.close()
        return cursor.lastrowid

    def insert_clicks(self, rows: list[tuple], with_visitor_key: bool) -> None:
        """Rows of CLICK_COLUMNS; the visitor key computed from their ip and ua_hash when the table has it."""
        self.conn.executemany(SQL_INSERT_CLICK if with_visitor_key else SQL_INSERT_CLICK_0004, rows).close()

    def bulk(self) -> AbstractContextManager[None]:
        """Around a bulk insert: a big page cache keeps the index pages in memory."""
        return large_cache(self.conn, 256)
