"""What every store module shares: the Store base and small helpers over a raw sqlite3 connection."""

from __future__ import annotations

import sqlite3


def fetch_one(conn: sqlite3.Connection, sql: str, params: tuple = ()) -> tuple | None:
    """The first row, with the cursor closed: an open read snapshot would fail the next write."""
    cursor = conn.execute(sql, params)
    try:
        return cursor.fetchone()
    finally:
        cursor.close()


class Store:
    """The statements of one aggregate over one raw connection; its writes join the caller's transaction."""

    __slots__ = ("conn",)

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
