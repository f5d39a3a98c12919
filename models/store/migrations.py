"""The migration history: which numbered migrations a database has (models/migrations/runner.py).

`migration_history(db)` is the history of `db`'s dialect: SQLite's replays every migration's
`apply(db)` (models/store/sqlite/migrations.py); PostgreSQL's creates a baseline standing for the
first ones and from there on runs each migration's `apply_postgres(db)` (models/store/postgres/).
"""

from __future__ import annotations

import importlib

from peewee import Database

from models.store.database import dialect_of
from models.store.rows import Dialectal


class MigrationHistory(Dialectal):
    SQL_APPLIED = "SELECT name, applied_at FROM migration_history"
    # Each dialect's own (run through peewee's execute_sql: each dialect's parameter style).
    SQL_CREATE_HISTORY: str
    SQL_RECORD: str
    SQL_IS_APPLIED: str

    step_function: str  # What each migration module calls its step for this dialect.
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


def migration_history(db: Database) -> MigrationHistory:
    """The migration history of `db`, in its dialect (the dialect's module imported only now)."""
    module = importlib.import_module(f"models.store.{dialect_of(db)}.migrations")
    return module.MigrationHistory(db)
