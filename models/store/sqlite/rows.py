"""Small helpers over a raw sqlite3 connection, for every store module."""

from __future__ import annotations

import sqlite3


def fetch_one(conn: sqlite3.Connection, sql: str, params: tuple = ()) -> tuple | None:
    """The first row, with the cursor closed: an open read snapshot would fail the next write."""
    cursor = conn.execute(sql, params)
    try:
        return cursor.fetchone()
    finally:
        cursor.close()
