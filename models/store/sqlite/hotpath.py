"""hotpath on SQLite: the probes of models/store/hotpath.py with the visitor index pinned.

`INDEXED BY` pins the visitor index so a stale planner statistic can never turn a probe into a scan
(models/store/postgres/hotpath.py is the same probes without it).
"""

from __future__ import annotations

import sqlite3

from models.store import hotpath as base
from models.store.rows import fetch_one, fetch_single


class VisitorProbe(base.VisitorProbe):
    __slots__ = ()
    dialect = "sqlite"
    BY_KEY = ("click INDEXED BY click_visitor_key", "visitor_key = ?1", 2)
    BY_IP_UA = ("click INDEXED BY click_visitor", "ip = ?1 AND ua_hash = ?2", 3)

    def history(self, conn: sqlite3.Connection, visitor: tuple, since: int) -> list[tuple]:
        return conn.execute(self._history, (*visitor, since)).fetchall()

    def seen(
        self,
        conn: sqlite3.Connection,
        visitor: tuple,
        global_since: int,
        campaign_since: int,
        campaign_id: int,
        stream_id: int | None,
    ) -> tuple[int, int, int]:
        params = (*visitor, global_since, campaign_since, campaign_id, stream_id)
        return fetch_single(conn, self._seen, params)

    def last_click(
        self, conn: sqlite3.Connection, visitor: tuple, since: int, campaign_id: int, user_agent: str
    ) -> tuple | None:
        return fetch_one(conn, self._last_click, (*visitor, since, campaign_id, user_agent))
