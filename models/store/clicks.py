"""The click table's writes and the spool position they land with (`spool_node`, one row a node).

A batch of journal lines lands in one transaction together with its node's journal position after
them, so a flush killed at any point and run again lands every click exactly once (the unique subid
drops a line that is already in). The record layout is models/clicks/record.py's; what a node is,
models/clicks/node.py's.
"""

from __future__ import annotations

from abc import abstractmethod

from models.store.history import HistoryStore
from models.store.rows import Store, fetch_one, fetch_single
from models.tables.click import CLICK_COLUMNS, JOURNAL_COLUMNS
from models.tables.dimensions import DIMENSIONS

# The same before migration 0005 (`lanner bench migration` builds such a database).
SQL_INSERT_CLICK_0004 = "INSERT INTO click ({}) VALUES ({}) ON CONFLICT DO NOTHING".format(
    ", ".join(CLICK_COLUMNS), ", ".join("?" * len(CLICK_COLUMNS))
)


class ClickStore(Store):
    """Landing clicks on one connection; writes join the caller's transaction."""

    SQL_POSITION = "SELECT segment, byte_offset FROM spool_node WHERE name = ?"
    SQL_UPDATED_AT = "SELECT updated_at FROM spool_node WHERE name = ?"
    SQL_SET_POSITION = "UPDATE spool_node SET segment = ?, byte_offset = ?, updated_at = ? WHERE name = ?"
    SQL_ADD_NODE = (
        "INSERT INTO spool_node (name, spool_id, segment, byte_offset, updated_at) VALUES (?, ?, 1, 0, 0) "
        "ON CONFLICT (name) DO NOTHING"
    )
    SQL_SPOOL_ID = "SELECT spool_id FROM spool_node WHERE name = ?"
    SQL_CLAIM = "UPDATE spool_node SET spool_id = ? WHERE name = ? AND spool_id = ''"
    SQL_BEAT = (
        "UPDATE spool_node SET heartbeat_at = ?, host = ?, unlanded_bytes = ?, backlog_ms = ? WHERE name = ?"
    )
    SQL_NODES = (
        "SELECT name, host, heartbeat_at, updated_at, segment, byte_offset, unlanded_bytes, backlog_ms "
        "FROM spool_node ORDER BY name"
    )

    # An LP click lands on its click once (the first LP line for the subid; a replayed one finds
    # lp_clicked_at set): the offer chosen then, and when; RETURNING the click's rollup key (its offer
    # as it was: none) and the click metrics that move with it to the offer (models/reporting/rollups.py).
    SQL_LAND_LP_CLICK = (
        "UPDATE click SET offer_id = ?, lp_clicked_at = ? "
        "WHERE subid = ? AND lander_id IS NOT NULL AND lp_clicked_at IS NULL "
        f"RETURNING created_at, {', '.join('NULL' if d == 'offer_id' else d for d in DIMENSIONS)}, "
        "is_unique_global, is_unique_campaign, is_unique_stream, is_bot, cost, id"
    )
    # The click's conversions (a postback before its LP click: rare) move to the offer with it; by the
    # (campaign_id, click_created_at) index, a conversion keeping its own copy of its click's offer.
    SQL_MOVE_CONVERSIONS = (
        "UPDATE conversion SET offer_id = ? WHERE campaign_id = ? AND click_created_at = ? AND click_id = ? "
        "RETURNING status, report_payout, cost, id"
    )
    # A click as the LP click reads it (models/clicks/tracker.py lp_click): the journal's record, its
    # visitor key, then when its LP click landed; by the unique subid index.
    SQL_LANDER_CLICK = (
        f"SELECT {', '.join(JOURNAL_COLUMNS)}, visitor_key, lp_clicked_at FROM click WHERE subid = ?"
    )
    SQL_CLICK_EXISTS = "SELECT 1 FROM click WHERE subid = ?"
    # An LP click whose click has not landed (cluster mode: it is in another node's spool) waits here.
    SQL_PARK_LP_CLICK = (
        "INSERT INTO lp_click_parked (subid, offer_id, clicked_at, parked_at) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (subid) DO NOTHING"
    )
    SQL_PARKED_LP_CLICKS = "SELECT subid, clicked_at, offer_id FROM lp_click_parked ORDER BY subid LIMIT 1000"
    SQL_UNPARK_LP_CLICK = "DELETE FROM lp_click_parked WHERE subid = ?"

    __slots__ = ()

    def land_lp_clicks(self, lp_clicks: list[tuple[str, int, int | None]], now_ms: int) -> list[tuple]:
        """Set (subid, clicked_at, offer_id) on their clicks, each only if its LP click has not landed
        yet; return (clicked_at, offer_id, the click's rollup key, its metrics, its conversions
        (status, report_payout, cost)) of the ones that did. One
        whose click is not in the table yet is parked until it is (`land_parked_lp_clicks`)."""
        landed, changed = [], []
        for subid, clicked_at, offer_id in lp_clicks:
            row = fetch_one(self.conn, self.SQL_LAND_LP_CLICK, (offer_id, clicked_at, subid))
            if row is not None:
                landed.append(self._landed_lp(clicked_at, offer_id, row))
                changed.append(row[-1])
            elif fetch_one(self.conn, self.SQL_CLICK_EXISTS, (subid,)) is None:
                self.conn.execute(self.SQL_PARK_LP_CLICK, (subid, offer_id, clicked_at, now_ms)).close()
        HistoryStore(self.conn).record_changes(changed)
        return landed

    def _landed_lp(self, clicked_at: int, offer_id: int | None, row: tuple) -> tuple:
        """(clicked_at, offer_id, the click's rollup key, its click metrics, its conversions moved)."""
        *values, click_id = row
        width = len(DIMENSIONS) + 1
        key = tuple(values[:width])
        cursor = self.conn.execute(self.SQL_MOVE_CONVERSIONS, (offer_id, key[1], key[0], click_id))
        try:
            moved = cursor.fetchall()
        finally:
            cursor.close()
        HistoryStore(self.conn).record_conversion_changes([row[-1] for row in moved])  # Copied again.
        conversions = [tuple(row[:-1]) for row in moved]
        return clicked_at, offer_id, key, tuple(values[width:]), conversions

    def land_parked_lp_clicks(self) -> list[tuple]:
        """Land the parked LP clicks whose clicks have landed since (as land_lp_clicks returns them)."""
        parked = self.conn.execute(self.SQL_PARKED_LP_CLICKS).fetchall()
        landed, changed = [], []
        for subid, clicked_at, offer_id in parked:
            row = fetch_one(self.conn, self.SQL_LAND_LP_CLICK, (offer_id, clicked_at, subid))
            if row is not None:
                landed.append(self._landed_lp(clicked_at, offer_id, row))
                changed.append(row[-1])
            elif fetch_one(self.conn, self.SQL_CLICK_EXISTS, (subid,)) is None:
                continue  # Its click has still not landed.
            self.conn.execute(self.SQL_UNPARK_LP_CLICK, (subid,)).close()
        HistoryStore(self.conn).record_changes(changed)
        return landed

    def lander_click(self, subid: str) -> tuple | None:
        """(JOURNAL_COLUMNS values..., visitor_key, lp_clicked_at) of the click, or None."""
        return fetch_one(self.conn, self.SQL_LANDER_CLICK, (subid,))

    def position(self, node: str) -> tuple[int, int]:
        """(segment, byte offset): where in the node's journal the next unlanded line starts (a node
        not in the table yet has landed nothing: the start of its first segment)."""
        row = fetch_one(self.conn, self.SQL_POSITION, (node,))
        return tuple(row) if row else (1, 0)

    def landed_at(self, node: str) -> int | None:
        """Unix ms of the last flush that moved the node's position."""
        row = fetch_one(self.conn, self.SQL_UPDATED_AT, (node,))
        return row[0] if row else None

    def set_position(self, node: str, segment: int, byte_offset: int, now_ms: int) -> None:
        self.conn.execute(self.SQL_SET_POSITION, (segment, byte_offset, now_ms, node)).close()

    def claim(self, node: str, spool_id: str) -> str:
        """Add the node's row if it has none, claim an unclaimed one for `spool_id`; return the spool id
        the row holds now (another one: the name is another spool's). Joins the caller's transaction."""
        self.conn.execute(self.SQL_ADD_NODE, (node, spool_id)).close()
        self.conn.execute(self.SQL_CLAIM, (spool_id, node)).close()
        return fetch_single(self.conn, self.SQL_SPOOL_ID, (node,))[0]

    def beat(self, node: str, now_ms: int, host: str, unlanded_bytes: int, backlog_ms: int | None) -> None:
        """The node's heartbeat, for `lanner status` on any node (a row for a node that has landed
        nothing yet)."""
        self.conn.execute(self.SQL_ADD_NODE, (node, "")).close()
        self.conn.execute(self.SQL_BEAT, (now_ms, host, unlanded_bytes, backlog_ms, node)).close()

    def nodes(self) -> list[tuple]:
        """(name, host, heartbeat_at, landed_at, segment, byte_offset, unlanded_bytes, backlog_ms) a node."""
        return self.conn.execute(self.SQL_NODES).fetchall()

    # Each dialect's own (models/store/sqlite/, models/store/postgres/).

    @abstractmethod
    def insert(self, rows: list[list]) -> list[list]:
        """Insert a batch of journal rows (JOURNAL_COLUMNS, then the visitor key the line carries or
        None); return the rows that were new (only those may reach the cap counters). A subid already
        in the table (a replayed line) does not land again."""
