"""retention on SQLite: what differs from PostgreSQL (models/store/postgres/retention.py); the rest is
models/store/retention.py's."""

from __future__ import annotations

from models.store import retention as base


class RetentionStore(base.RetentionStore):
    __slots__ = ()
    dialect = "sqlite"
    SQL_COUNT_OLDER = (
        "SELECT COUNT(*) FROM click INDEXED BY click_campaign_created_at "
        "WHERE campaign_id = ? AND created_at < ?"
    )
    SQL_DELETE_CLICKS = """
DELETE FROM click WHERE id IN (
    SELECT id FROM click INDEXED BY click_campaign_created_at
    WHERE campaign_id = ? AND created_at < ? LIMIT ?
)
"""
    # Parked postbacks stay until they expire, however old.
    SQL_DELETE_POSTBACK_LOG = """
DELETE FROM postback_log WHERE id IN (
    SELECT id FROM postback_log INDEXED BY postback_log_received_at
    WHERE received_at < ? AND verdict != 'parked' LIMIT ?
)
"""
