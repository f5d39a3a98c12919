"""deliveries on SQLite: what differs from PostgreSQL (models/store/postgres/deliveries.py); the rest is
models/store/deliveries.py's."""

from __future__ import annotations

from models.store import deliveries as base


class DeliveryStore(base.DeliveryStore):
    __slots__ = ()
    dialect = "sqlite"
    SQL_DUE = """
SELECT id FROM postback_delivery INDEXED BY postback_delivery_due
WHERE state = 'pending' AND next_attempt_at <= ? ORDER BY next_attempt_at LIMIT ?
"""

    def claim_due_events(self, connection_id: int, now_ms: int, until_ms: int, limit: int) -> list[int]:
        # The write transaction holds the whole database: no other sender claims between the two.
        due = self.connection_due(connection_id, now_ms, limit)
        return [delivery_id for delivery_id in due if self.claim(delivery_id, now_ms, until_ms)]

    def _queued_id(self, sql: str, params: tuple) -> int | None:
        """Run SQL_QUEUE or SQL_QUEUE_EVENT; the new delivery's id, None if it was queued before."""
        cursor = self.conn.execute(sql, params)
        return cursor.lastrowid if cursor.rowcount else None
