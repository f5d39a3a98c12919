"""The migration history on PostgreSQL: SQLite's table, with a baseline standing for 0001..0011.

An empty database gets schema.py's baseline and a history row for each migration it stands for, in
one transaction, so `required_version()` and `lanner db status` read the same on both dialects. A
migration after the baseline provides `apply_postgres(db)` beside SQLite's `apply(db)`.
"""

from __future__ import annotations

from models.store import migrations as base
from models.store.postgres.schema import create_baseline


class MigrationHistory(base.MigrationHistory):
    dialect = "postgres"
    SQL_CREATE_HISTORY = (
        "CREATE TABLE IF NOT EXISTS migration_history "
        "(name TEXT NOT NULL PRIMARY KEY, applied_at BIGINT NOT NULL)"
    )
    SQL_RECORD = "INSERT INTO migration_history (name, applied_at) VALUES (%s, %s)"
    SQL_IS_APPLIED = "SELECT 1 FROM migration_history WHERE name = %s"

    step_function = "apply_postgres"
    baseline_through = "0011_country_rollups"

    def create_baseline(self, now_ms: int) -> None:
        create_baseline(self.db, now_ms)
