"""generated on PostgreSQL: SQLite's fixture writes, but for what only SQLite has.

- No lastrowid in psycopg: an insert RETURNING id.
- PRAGMA table_info is SQLite's catalog: information_schema's columns are PostgreSQL's.
- lanner_visitor_key is a Python function registered on SQLite's connection: here the store
  computes the key in Python (the same function) and sends it with the row.
- No page cache to enlarge; ANALYZE is PRAGMA optimize's counterpart.
"""

from __future__ import annotations

import contextlib

from models.store import generated as base
from models.store.clicks import SQL_INSERT_CLICK_0004
from models.store.functions import visitor_key
from models.store.history import HistoryStore
from models.tables.click import CLICK_COLUMNS, IP, UA_HASH

SQL_INSERT_CLICK_WITH_KEY = "INSERT INTO click ({}, visitor_key) VALUES ({}) ON CONFLICT DO NOTHING".format(
    ", ".join(CLICK_COLUMNS), ", ".join("?" * (len(CLICK_COLUMNS) + 1))
)


class GeneratedStore(base.GeneratedStore):
    __slots__ = ()
    dialect = "postgres"
    SQL_CLICK_COLUMNS = (
        "SELECT ordinal_position, column_name FROM information_schema.columns "
        "WHERE table_schema = current_schema() AND table_name = 'click'"
    )
    SQL_OPTIMIZE = "ANALYZE click"

    def _inserted(self, sql: str, params: tuple) -> int:
        return self.conn.execute(sql + " RETURNING id", params).fetchone()[0]

    def insert_clicks(self, rows: list[tuple], with_visitor_key: bool) -> None:
        HistoryStore(self.conn).guard()  # Before any id is taken: the history's watermark stays closed.
        if not with_visitor_key:
            self.conn.executemany(SQL_INSERT_CLICK_0004, rows).close()
            return
        keyed = [(*row, visitor_key(row[IP], row[UA_HASH])) for row in rows]
        self.conn.executemany(SQL_INSERT_CLICK_WITH_KEY, keyed).close()

    def bulk(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()
