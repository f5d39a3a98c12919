"""hotpath on PostgreSQL: the web worker's visitor probes (models/store/hotpath.py) without `INDEXED BY`.

SQLite pins the visitor index because its planner may pick a worse one from stale statistics;
PostgreSQL has no such hint and picks click_visitor_key (the covering index of the schema) by itself.
Its schema was born after migration 0005, so only the by-key probes are ever used; the (ip, ua_hash)
ones are spelled here only so that the class answers what SQLite's does.

PERF: the probes run on one cursor kept for the connection, their `?` translated once: a psycopg
cursor costs ~19 µs to make, as much as the probe's round trip itself (sqlite3's cost ~1). psycopg
fetches a result whole, so a cursor left with rows holds nothing open on the server.
"""

from __future__ import annotations

import psycopg

from models.store import hotpath as base
from models.store.postgres.clicks import without_nul
from models.store.postgres.database import PostgresUnavailable
from models.store.postgres.params import qmark_to_pyformat


class VisitorProbe(base.VisitorProbe):
    __slots__ = ("_cursor",)
    dialect = "postgres"
    BY_KEY = ("click", "visitor_key = ?1", 2)
    BY_IP_UA = ("click", "ip = ?1 AND ua_hash = ?2", 3)

    def __init__(self, by_key: bool) -> None:
        super().__init__(by_key)
        self._cursor: psycopg.Cursor | None = None

    def _run(self, conn: psycopg.Connection, sql: str, params: tuple) -> psycopg.Cursor:
        cursor = self._cursor
        if cursor is None or cursor.connection is not conn:  # The first probe, or a new connection.
            try:
                cursor = self._cursor = conn.cursor()
            except psycopg.OperationalError as error:  # A connection lost: "not now", as conn.execute says.
                raise PostgresUnavailable(error) from error
        query, order = qmark_to_pyformat(sql, True)
        return cursor.execute(query, params if order is None else [params[index] for index in order])

    def history(self, conn: psycopg.Connection, visitor: tuple, since: int) -> list[tuple]:
        return self._run(conn, self._history, (*visitor, since)).fetchall()

    def seen(
        self,
        conn: psycopg.Connection,
        visitor: tuple,
        global_since: int,
        campaign_since: int,
        campaign_id: int,
        stream_id: int | None,
    ) -> tuple[int, int, int]:
        params = (*visitor, global_since, campaign_since, campaign_id, stream_id)
        row = self._run(conn, self._seen, params).fetchone()
        assert row is not None  # SELECT EXISTS ..., EXISTS ...: always one row.
        return row

    def last_click(
        self, conn: psycopg.Connection, visitor: tuple, since: int, campaign_id: int, user_agent: str
    ) -> tuple | None:
        user_agent = without_nul(user_agent)  # As the click was landed (models/store/postgres/clicks.py).
        return self._run(conn, self._last_click, (*visitor, since, campaign_id, user_agent)).fetchone()
