"""retention on PostgreSQL: SQLite's chunked deletes without INDEXED BY, SQLite's planner hint.

PostgreSQL's planner takes click_campaign_created_at and postback_log_received_at by itself. A chunk of
`lanner prune` locks its rows before it deletes them (SQLite has one writer and needs no such step).
"""

from __future__ import annotations

from models.store import retention as base


class RetentionStore(base.RetentionStore):
    __slots__ = ()
    dialect = "postgres"
    SQL_COUNT_OLDER = "SELECT COUNT(*) FROM click WHERE campaign_id = ? AND created_at < ?"
    # `lanner prune`'s chunk: lock the rows first, skipping any a mutation holds (it may be queueing the
    # click for a fresh copy), then delete the unqueued ones in a statement of their own, which under READ
    # COMMITTED sees every queue row committed before it (as _delete_held does).
    SQL_LOCK_OLDER = (
        "SELECT id FROM click WHERE campaign_id = ? AND created_at < ? AND id < (SELECT MAX(id) FROM click) "
        "AND " + base.RetentionStore._NOT_QUEUED + " LIMIT ? FOR UPDATE SKIP LOCKED"
    )
    SQL_DELETE_CLICKS = (
        "DELETE FROM click WHERE id = ANY(CAST(? AS BIGINT[])) AND " + base.RetentionStore._NOT_QUEUED
    )
    SQL_DELETE_POSTBACK_LOG = """
DELETE FROM postback_log WHERE id IN (
    SELECT id FROM postback_log WHERE received_at < ? AND verdict != 'parked' LIMIT ?
)
"""
    SQL_HELD_BEFORE = (
        "SELECT id FROM click WHERE campaign_id = ? AND created_at < ? AND "
        + base.RetentionStore._HELD
        + " ORDER BY created_at LIMIT ?"
    )
    SQL_DELETE_HELD = "DELETE FROM click WHERE id = ANY(CAST(? AS BIGINT[])) AND " + base.RetentionStore._HELD
    # Rows a mutation holds are left for the next run: the deleter never waits, so never deadlocks.
    SQL_LOCK_ROWS = "SELECT id FROM click WHERE id = ANY(CAST(? AS BIGINT[])) FOR UPDATE SKIP LOCKED"

    def delete_clicks_before(self, campaign_id: int, cutoff_ms: int, chunk: int) -> int:
        locked = [row[0] for row in self.conn.execute(self.SQL_LOCK_OLDER, (campaign_id, cutoff_ms, chunk))]
        if not locked:
            return 0
        return self.conn.execute(self.SQL_DELETE_CLICKS, (locked,)).rowcount

    def _delete_held(self, click_ids: list[int]) -> int:
        locked = [row[0] for row in self.conn.execute(self.SQL_LOCK_ROWS, (click_ids,)).fetchall()]
        if not locked:
            return 0
        # A statement of its own: under READ COMMITTED it sees the queue rows committed meanwhile.
        return self.conn.execute(self.SQL_DELETE_HELD, (locked,)).rowcount
