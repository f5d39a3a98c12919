"""The SQL a web worker runs per click, as constants over the raw connection.

PERF: building a Peewee query costs ~300-400 µs; these prepared statements (sqlite3 caches them
per connection) cost ~10 µs each. Web workers only read: clicks are written by the spool flusher.
Each dialect names the click table as its probes read it (SQLite pins the visitor index with
`INDEXED BY`, models/store/sqlite/hotpath.py), and `visitor_probe(conn)` picks the dialect's probes
for the connection, so handlers do not change.
"""

from __future__ import annotations

from abc import abstractmethod

from models.store.meta import MetaStore
from models.store.rows import Dialectal

# PERF: one range scan of the visitor's recent clicks (~6 µs, usually no row) answers all three
# scopes; the three EXISTS below (~15 µs) only run for a visitor with more rows than that.
VISITOR_HISTORY_LIMIT = 64


def probe_sql(source: str, visitor: str, n: int) -> tuple[str, str, str]:
    """(history, seen, last_click) reading `source` (the click table, pinned to an index or not)."""
    history = f"""
SELECT campaign_id, stream_id, offer_id, created_at FROM {source}
WHERE {visitor} AND created_at >= ?{n}
ORDER BY created_at DESC LIMIT {VISITOR_HISTORY_LIMIT}
"""
    seen = f"""
SELECT
    EXISTS (SELECT 1 FROM {source} WHERE {visitor} AND created_at >= ?{n}),
    EXISTS (SELECT 1 FROM {source}
            WHERE {visitor} AND created_at >= ?{n + 1} AND campaign_id = ?{n + 2}),
    EXISTS (SELECT 1 FROM {source}
            WHERE {visitor} AND created_at >= ?{n + 1} AND stream_id = ?{n + 3})
"""
    last_click = f"""
SELECT subid, stream_id, offer_id, created_at, lander_id FROM {source}
WHERE {visitor} AND created_at >= ?{n} AND campaign_id = ?{n + 1} AND user_agent = ?{n + 2}
ORDER BY created_at DESC LIMIT 1
"""
    return history, seen, last_click


class VisitorProbe(Dialectal):
    """The uniqueness probes of one visitor index (`by_key` or the pre-0005 one)."""

    __slots__ = ("by_key", "_history", "_seen", "_last_click")
    # Two visitor indexes: (visitor_key, created_at, campaign_id, stream_id, offer_id) answers the
    # history and the EXISTS from the index alone; (ip, ua_hash, created_at), the one before migration
    # 0005, stays in use until that migration's backfill and index build are done (meta visitor_probe).
    # Each SQL takes the visitor as its first parameters: (visitor_key,) or (ip, ua_hash).
    # (the table as the probes read it, the visitor's condition, the number of the first parameter after it)
    BY_KEY: tuple[str, str, int]
    BY_IP_UA: tuple[str, str, int]

    def __init__(self, by_key: bool) -> None:
        self.by_key = by_key
        self._history, self._seen, self._last_click = probe_sql(*(self.BY_KEY if by_key else self.BY_IP_UA))

    def visitor(self, ip: str, ua_hash: int, key: int) -> tuple:
        """The visitor as this index's probes take it: its key (computed once a click by the tracker), or
        (ip, ua_hash) before migration 0005's index."""
        return (key,) if self.by_key else (ip, ua_hash)

    @abstractmethod
    def history(self, conn, visitor: tuple, since: int) -> list[tuple]:
        """The visitor's latest clicks since `since`, newest first: (campaign, stream, offer, created_at).

        At most VISITOR_HISTORY_LIMIT rows: a longer history (a NAT address) is asked exactly per
        scope with `seen`.
        """

    @abstractmethod
    def seen(
        self,
        conn,
        visitor: tuple,
        global_since: int,
        campaign_since: int,
        campaign_id: int,
        stream_id: int | None,
    ) -> tuple[int, int, int]:
        """(seen globally, seen in campaign, seen in stream) within the windows, exactly."""

    @abstractmethod
    def last_click(self, conn, visitor: tuple, since: int, campaign_id: int, user_agent: str) -> tuple | None:
        """(subid, stream id, offer id, created_at, lander id) of the visitor's latest click in the
        campaign with this user agent since `since`, or None."""


def visitor_probe(conn) -> VisitorProbe:
    """The probes the database is ready for: by key once migration 0005's index is built, in the
    connection's dialect (its module imported on first use, as the stores')."""
    probe = VisitorProbe.sibling_for(conn)
    return probe(by_key=MetaStore(conn).get("visitor_probe") == "key")
