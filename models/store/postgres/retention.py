"""retention on PostgreSQL: SQLite's chunked deletes without INDEXED BY, SQLite's planner hint.

PostgreSQL's planner takes click_campaign_created_at and postback_log_received_at by itself; the
chunk is already a `DELETE ... WHERE id IN (SELECT id ... LIMIT ?)`, which both dialects run.
"""

from __future__ import annotations

from models.store import retention as base


class RetentionStore(base.RetentionStore):
    __slots__ = ()
    dialect = "postgres"
    SQL_COUNT_OLDER = "SELECT COUNT(*) FROM click WHERE campaign_id = ? AND created_at < ?"
    SQL_DELETE_CLICKS = """
DELETE FROM click WHERE id IN (
    SELECT id FROM click WHERE campaign_id = ? AND created_at < ? LIMIT ?
)
"""
    SQL_DELETE_POSTBACK_LOG = """
DELETE FROM postback_log WHERE id IN (
    SELECT id FROM postback_log WHERE received_at < ? AND verdict != 'parked' LIMIT ?
)
"""
