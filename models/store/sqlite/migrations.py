"""The migration history on SQLite (models/store/migrations.py): SQLite replays every migration's
`apply(db)`, it has no baseline."""

from __future__ import annotations

from models.store import migrations as base


class MigrationHistory(base.MigrationHistory):
    dialect = "sqlite"
    SQL_CREATE_HISTORY = (
        "CREATE TABLE IF NOT EXISTS migration_history "
        "(name TEXT NOT NULL PRIMARY KEY, applied_at INTEGER NOT NULL)"
    )
    SQL_RECORD = "INSERT INTO migration_history (name, applied_at) VALUES (?, ?)"
    SQL_IS_APPLIED = "SELECT 1 FROM migration_history WHERE name = ?"

    step_function = "apply"
