"""deliveries: SQLite's statements (models/store/sqlite/deliveries.py) on PostgreSQL.

What differs (so far: the due deliveries `lanner worker` sweeps every minute): no `INDEXED BY`
(PostgreSQL has no index hints; its planner picks postback_delivery_due).
"""

from __future__ import annotations

from models.store.sqlite import deliveries as sqlite


class DeliveryStore(sqlite.DeliveryStore):
    __slots__ = ()
    dialect = "postgres"
    SQL_DUE = """
SELECT id FROM postback_delivery
WHERE state = 'pending' AND next_attempt_at <= ? ORDER BY next_attempt_at LIMIT ?
"""
