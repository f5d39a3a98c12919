"""The deferred migration steps' table, `deferred_step` (models/migrations/deferred.py runs the steps)."""

from __future__ import annotations

from models.store.rows import Store, fetch_one

_SELECT_STEPS = (
    "SELECT name, state, position, target, done_units, total_units, started_at, finished_at, error "
    "FROM deferred_step"
)


class DeferredStepStore(Store):
    __slots__ = ()
    SQL_STEPS = _SELECT_STEPS + " ORDER BY rowid"  # In the order the migrations registered them.
    SQL_STEP = _SELECT_STEPS + " WHERE name = ?"
    SQL_SAVE = """
UPDATE deferred_step SET state = ?, position = ?, done_units = ?, started_at = COALESCE(started_at, ?),
    finished_at = ? WHERE name = ?
"""
    SQL_STATE = "SELECT state FROM deferred_step WHERE name = ?"

    def rows(self) -> list[tuple]:
        cursor = self.conn.execute(self.SQL_STEPS)
        try:
            return cursor.fetchall()
        finally:
            cursor.close()

    def row(self, name: str) -> tuple | None:
        return fetch_one(self.conn, self.SQL_STEP, (name,))

    def save(self, name: str, state: str, position: int, done_units: int, now: int, finished: int | None):
        self.conn.execute(self.SQL_SAVE, (state, position, done_units, now, finished, name)).close()

    def state(self, name: str) -> str | None:
        row = fetch_one(self.conn, self.SQL_STATE, (name,))
        return None if row is None else row[0]
