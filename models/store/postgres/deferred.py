"""The deferred migration steps' table on PostgreSQL: SQLite's statements in psycopg's parameter style.

Its `rowid` is a real column here (models/store/postgres/schema.py), so the order is SQLite's.
"""

from __future__ import annotations

from models.store.sqlite.deferred import _SELECT_STEPS
from models.store.sqlite.deferred import DeferredStepStore as SqliteDeferredStepStore


class DeferredStepStore(SqliteDeferredStepStore):
    SQL_STEPS = _SELECT_STEPS + " ORDER BY rowid"
    SQL_STEP = _SELECT_STEPS + " WHERE name = %s"
    SQL_SAVE = """
UPDATE deferred_step SET state = %s, position = %s, done_units = %s, started_at = COALESCE(started_at, %s),
    finished_at = %s WHERE name = %s
"""
    SQL_STATE = "SELECT state FROM deferred_step WHERE name = %s"
