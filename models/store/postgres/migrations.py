"""The migration history on PostgreSQL: SQLite's table, with a baseline standing for 0001..0011.

An empty database gets schema.py's baseline and a history row for each migration it stands for, in
one transaction, so `required_version()` and `lanner db status` read the same on both dialects. A
migration after the baseline provides `apply_postgres(db)` beside SQLite's `apply(db)`.
"""

from __future__ import annotations

from peewee import Database

from models.store.postgres.schema import create_baseline


class MigrationHistory:
    SQL_CREATE_HISTORY = (
        "CREATE TABLE IF NOT EXISTS migration_history "
        "(name TEXT NOT NULL PRIMARY KEY, applied_at BIGINT NOT NULL)"
    )
    SQL_APPLIED = "SELECT name, applied_at FROM migration_history"
    SQL_RECORD = "INSERT INTO migration_history (name, applied_at) VALUES (%s, %s)"
    SQL_IS_APPLIED = "SELECT 1 FROM migration_history WHERE name = %s"

    step_function = "apply_postgres"
    baseline_through = "0011_country_rollups"

    def __init__(self, db: Database) -> None:
        self.db = db

    def applied(self) -> dict[str, int]:
        self.db.execute_sql(self.SQL_CREATE_HISTORY)
        return dict(self.db.execute_sql(self.SQL_APPLIED).fetchall())

    def record(self, name: str, applied_at: int) -> None:
        self.db.execute_sql(self.SQL_RECORD, (name, applied_at))

    def is_applied(self, name: str) -> bool:
        return self.db.execute_sql(self.SQL_IS_APPLIED, (name,)).fetchone() is not None

    def create_baseline(self, now_ms: int) -> None:
        create_baseline(self.db, now_ms)
