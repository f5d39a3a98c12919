"""retention on SQLite: what differs from PostgreSQL (models/store/postgres/retention.py); the rest is
models/store/retention.py's."""

from __future__ import annotations

from models.store import retention as base


class RetentionStore(base.RetentionStore):
    """Neither delete takes the newest click: a new one gets max(id) + 1 (no AUTOINCREMENT), and an id
    reused below the history's position would never be copied."""

    __slots__ = ()
    dialect = "sqlite"
    SQL_COUNT_OLDER = (
        "SELECT COUNT(*) FROM click INDEXED BY click_campaign_created_at "
        "WHERE campaign_id = ? AND created_at < ?"
    )
    SQL_DELETE_CLICKS = (
        """
DELETE FROM click WHERE id IN (
    SELECT id FROM click INDEXED BY click_campaign_created_at
    WHERE campaign_id = ? AND created_at < ? AND id < (SELECT MAX(id) FROM click)
    AND """
        + base.RetentionStore._NOT_QUEUED
        + """ LIMIT ?
)
"""
    )
    # Parked postbacks stay until they expire, however old.
    SQL_DELETE_POSTBACK_LOG = """
DELETE FROM postback_log WHERE id IN (
    SELECT id FROM postback_log INDEXED BY postback_log_received_at
    WHERE received_at < ? AND verdict != 'parked' LIMIT ?
)
"""
    SQL_HELD_BEFORE = (
        "SELECT id FROM click INDEXED BY click_campaign_created_at WHERE campaign_id = ? AND created_at < ? "
        "AND " + base.RetentionStore._HELD + " ORDER BY created_at LIMIT ?"
    )
    SQL_DELETE_HELD = "DELETE FROM click WHERE id IN ({}) AND " + base.RetentionStore._HELD  # {}: a ? per id.

    def _delete_held(self, click_ids: list[int]) -> int:
        """One writer at a time (BEGIN IMMEDIATE): no mutation can be in flight. The ids as parameters:
        a batch is far below SQLite's 32,766 a statement."""
        sql = self.SQL_DELETE_HELD.format(",".join("?" * len(click_ids)))
        return self.conn.execute(sql, click_ids).rowcount
