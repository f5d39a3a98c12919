"""The SQL a web worker runs per click, as constants over the raw connection.

PERF: building a Peewee query costs ~300-400 µs; these prepared statements (sqlite3 caches them
per connection) cost ~10 µs each. Web workers only read: clicks are written by the spool flusher.
`INDEXED BY` pins the visitor index so a stale planner statistic can never turn a probe into a scan
(another dialect gets its own constants here, handlers do not change).
"""

from __future__ import annotations

import sqlite3

# PERF: one range scan of the visitor's recent clicks (~6 µs, usually no row) answers all three
# scopes; the three EXISTS below (~15 µs) only run for a visitor with more rows than that.
VISITOR_HISTORY_LIMIT = 64
SQL_VISITOR_HISTORY = f"""
SELECT campaign_id, stream_id, offer_id, created_at FROM click INDEXED BY click_visitor
WHERE ip = ? AND ua_hash = ? AND created_at >= ?
ORDER BY created_at DESC LIMIT {VISITOR_HISTORY_LIMIT}
"""

SQL_VISITOR_SEEN = """
SELECT
    EXISTS (SELECT 1 FROM click INDEXED BY click_visitor
            WHERE ip = ?1 AND ua_hash = ?2 AND created_at >= ?3),
    EXISTS (SELECT 1 FROM click INDEXED BY click_visitor
            WHERE ip = ?1 AND ua_hash = ?2 AND created_at >= ?4 AND campaign_id = ?5),
    EXISTS (SELECT 1 FROM click INDEXED BY click_visitor
            WHERE ip = ?1 AND ua_hash = ?2 AND created_at >= ?4 AND stream_id = ?6)
"""

SQL_LAST_CLICK = """
SELECT subid, stream_id, offer_id, created_at FROM click INDEXED BY click_visitor
WHERE ip = ? AND ua_hash = ? AND created_at >= ? AND campaign_id = ? AND user_agent = ?
ORDER BY created_at DESC LIMIT 1
"""

SQL_CONFIG_VERSION = "SELECT value FROM meta WHERE key = 'config_version'"


def fetch_one(conn: sqlite3.Connection, sql: str, params: tuple = ()) -> tuple | None:
    """The first row, with the cursor closed: an open read snapshot would fail the next write."""
    cursor = conn.execute(sql, params)
    try:
        return cursor.fetchone()
    finally:
        cursor.close()


def visitor_history(conn: sqlite3.Connection, ip: str, ua_hash: int, since: int) -> list[tuple]:
    """The visitor's latest clicks since `since`, newest first: (campaign, stream, offer, created_at).

    At most VISITOR_HISTORY_LIMIT rows: a longer history (a NAT address) is asked exactly per
    scope with `visitor_seen`.
    """
    return conn.execute(SQL_VISITOR_HISTORY, (ip, ua_hash, since)).fetchall()


def visitor_seen(
    conn: sqlite3.Connection,
    ip: str,
    ua_hash: int,
    global_since: int,
    campaign_since: int,
    campaign_id: int,
    stream_id: int | None,
) -> tuple[int, int, int]:
    """(seen globally, seen in campaign, seen in stream) within the windows, exactly."""
    return fetch_one(
        conn, SQL_VISITOR_SEEN, (ip, ua_hash, global_since, campaign_since, campaign_id, stream_id)
    )


def last_click(
    conn: sqlite3.Connection, ip: str, ua_hash: int, since: int, campaign_id: int, user_agent: str
) -> tuple | None:
    return fetch_one(conn, SQL_LAST_CLICK, (ip, ua_hash, since, campaign_id, user_agent))


def config_version(conn: sqlite3.Connection) -> str:
    row = fetch_one(conn, SQL_CONFIG_VERSION)
    return row[0] if row else ""
