"""Apply numbered migrations, each together with its history row in one transaction."""

from __future__ import annotations

import importlib
import pkgutil
import time
from dataclasses import dataclass
from typing import Callable

from peewee import Database

import models.migrations as migrations_package
from models.errors import LannerError
from models.store.database import write_tx

SQL_CREATE_HISTORY = (
    "CREATE TABLE IF NOT EXISTS migration_history "
    "(name TEXT NOT NULL PRIMARY KEY, applied_at INTEGER NOT NULL)"
)
SQL_APPLIED = "SELECT name, applied_at FROM migration_history"
SQL_RECORD = "INSERT INTO migration_history (name, applied_at) VALUES (?, ?)"


@dataclass(frozen=True)
class MigrationState:
    name: str
    applied_at: int | None  # Unix milliseconds; None while pending.


def migration_names() -> list[str]:
    return sorted(
        info.name for info in pkgutil.iter_modules(migrations_package.__path__) if info.name[:4].isdigit()
    )


def required_version() -> str:
    """The newest migration the code needs; web workers refuse an older database."""
    return migration_names()[-1]


def _applied(db: Database) -> dict[str, int]:
    db.execute_sql(SQL_CREATE_HISTORY)
    return dict(db.execute_sql(SQL_APPLIED).fetchall())


def migration_status(db: Database) -> list[MigrationState]:
    applied = _applied(db)
    return [MigrationState(name, applied.get(name)) for name in migration_names()]


def pending_migrations(db: Database) -> list[str]:
    applied = _applied(db)
    return [name for name in migration_names() if name not in applied]


def migrate(
    db: Database, on_applied: Callable[[str], None] | None = None, *, up_to: str | None = None
) -> list[str]:
    """Apply every pending migration in order (or up to and including `up_to`); return their names."""
    if up_to is not None and up_to not in migration_names():
        raise ValueError(f"No migration is named {up_to!r}.")
    done = []
    for name in pending_migrations(db):
        if up_to is not None and name > up_to:
            break
        module = importlib.import_module(f"{migrations_package.__name__}.{name}")
        with write_tx(db):
            module.apply(db)
            db.execute_sql(SQL_RECORD, (name, int(time.time() * 1000)))
        done.append(name)
        if on_applied:
            on_applied(name)
    return done


class SchemaOutdated(LannerError, RuntimeError):
    """The database is older than this code; `lanner db migrate` fixes it."""


def require_current_schema(db: Database, path: object) -> None:
    """Refuse a database older than the code, with the fix in the message: the one schema check of
    every process (web and admin workers, `lanner worker`, `lanner serve`, the CLI's commands)."""
    if not schema_is_current(db):
        raise SchemaOutdated(f"The database {path} needs migrating: run `lanner db migrate`.")


def schema_is_current(db: Database) -> bool:
    try:
        rows = db.execute_sql("SELECT 1 FROM migration_history WHERE name = ?", (required_version(),))
        return rows.fetchone() is not None
    except Exception:  # No history table yet: never migrated.
        return False
