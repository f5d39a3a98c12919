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

    # The limit is read once, in a materialized CTE: `WHERE id IN (SELECT … LIMIT n FOR UPDATE SKIP
    # LOCKED)` may be run again for each outer row by a semi-join plan, each run skipping the rows the
    # last one locked, and claimed every pending event (1,050 for a limit of 1,000, seen under load).
    SQL_CLAIM_DUE_EVENTS = """
WITH due AS MATERIALIZED (
    SELECT id FROM postback_delivery
    WHERE connection_id = ? AND state = 'pending' AND next_attempt_at <= ?
    ORDER BY next_attempt_at, id LIMIT ? FOR UPDATE SKIP LOCKED
)
UPDATE postback_delivery SET next_attempt_at = ?, attempts = attempts + 1, updated_at = ?
FROM due WHERE postback_delivery.id = due.id
RETURNING postback_delivery.id
"""

    def claim_due_events(self, connection_id: int, now_ms: int, until_ms: int, limit: int) -> list[int]:
        params = (connection_id, now_ms, limit, until_ms, now_ms)
        return sorted(row[0] for row in self.conn.execute(self.SQL_CLAIM_DUE_EVENTS, params).fetchall())

    def _queued_id(self, sql: str, params: tuple) -> int | None:
        row = fetch_one(self.conn, sql, params)
        return row[0] if row else None
