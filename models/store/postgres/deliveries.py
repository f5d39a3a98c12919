"""deliveries on PostgreSQL: what differs from SQLite (models/store/sqlite/deliveries.py);
the rest is models/store/deliveries.py's.

- A queued delivery's id comes back through `ON CONFLICT DO NOTHING RETURNING id`: psycopg has no
  `cursor.lastrowid`, and a delivery queued before returns no row (SQLite's rowcount 0).
- A platform connection's batch is claimed in one statement that skips the rows another sender's
  transaction holds (`FOR UPDATE SKIP LOCKED`): two senders claiming row by row, each its own event
  first and then the other's, deadlocked.
- SQLite's `INDEXED BY postback_delivery_due` is dropped: PostgreSQL's planner uses the partial
  index for the literal `state = 'pending'` by itself. Due deliveries with the same next attempt are
  taken by id, the order SQLite's index gives them.
"""

from __future__ import annotations

from models.store import deliveries as base
from models.store.rows import fetch_one


class DeliveryStore(base.DeliveryStore):
    """The deliveries of one PostgreSQL connection; writes join the caller's transaction."""

    __slots__ = ()
    dialect = "postgres"

    SQL_QUEUE = base.DeliveryStore.SQL_QUEUE.rstrip() + " RETURNING id"
    SQL_QUEUE_EVENT = base.DeliveryStore.SQL_QUEUE_EVENT.rstrip() + " RETURNING id"
    SQL_DUE = """
SELECT id FROM postback_delivery
WHERE state = 'pending' AND next_attempt_at <= ? ORDER BY next_attempt_at, id LIMIT ?
"""

    SQL_CLAIM_DUE_EVENTS = """
UPDATE postback_delivery SET next_attempt_at = ?, attempts = attempts + 1, updated_at = ?
WHERE id IN (
    SELECT id FROM postback_delivery
    WHERE connection_id = ? AND state = 'pending' AND next_attempt_at <= ?
    ORDER BY next_attempt_at, id LIMIT ? FOR UPDATE SKIP LOCKED
)
RETURNING id
"""

    def claim_due_events(self, connection_id: int, now_ms: int, until_ms: int, limit: int) -> list[int]:
        params = (until_ms, now_ms, connection_id, now_ms, limit)
        return sorted(row[0] for row in self.conn.execute(self.SQL_CLAIM_DUE_EVENTS, params).fetchall())

    def _queued_id(self, sql: str, params: tuple) -> int | None:
        row = fetch_one(self.conn, sql, params)
        return row[0] if row else None
