"""The migration history on SQLite: which numbered migrations a database has (models/migrations/runner.py).

SQLite replays every migration's `apply(db)`: it has no baseline.
"""

from __future__ import annotations

from peewee import Database


class MigrationHistory:
    SQL_CREATE_HISTORY = (
        "CREATE TABLE IF NOT EXISTS migration_history "
        "(name TEXT NOT NULL PRIMARY KEY, applied_at INTEGER NOT NULL)"
    )
    SQL_APPLIED = "SELECT name, applied_at FROM migration_history"
    SQL_RECORD = "INSERT INTO migration_history (name, applied_at) VALUES (?, ?)"
    SQL_IS_APPLIED = "SELECT 1 FROM migration_history WHERE name = ?"

    step_function = "apply"  # What each migration module calls its step for this dialect.
    baseline_through: str | None = None  # The last migration a baseline stands for; none here.

    def __init__(self, db: Database) -> None:
        self.db = db

    def applied(self) -> dict[str, int]:
        """Migration name -> when it was applied (Unix ms); creates the history table when missing."""
        self.db.execute_sql(self.SQL_CREATE_HISTORY)
        return dict(self.db.execute_sql(self.SQL_APPLIED).fetchall())

    def record(self, name: str, applied_at: int) -> None:
        self.db.execute_sql(self.SQL_RECORD, (name, applied_at))

    def is_applied(self, name: str) -> bool:
        return self.db.execute_sql(self.SQL_IS_APPLIED, (name,)).fetchone() is not None

    def create_baseline(self, now_ms: int) -> None:
        raise NotImplementedError("SQLite has no baseline: it applies every migration")
